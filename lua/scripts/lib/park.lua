-- lib/park.lua: wake-ups and parked tenants. Provides wake (one PUBLISH per call when work may be
-- ready), queue_vtime and vtime_of (the fair-share clock, read or as read), unpark / unpark_due (a parked tenant back into
-- the fair-share set) and PARKED_CAPPED (the score of a tenant parked at its max_inflight).
-- Needs: format
-- Per-call state: c.woken (whether this call has published its wake-up).

local PARKED_CAPPED, vtime_of, queue_vtime, wake, unpark, unpark_due
do
  -- Score of a tenant parked at its max_inflight: it waits for one of its leases to end (or for its
  -- limits to change), not for a time (2^53 - 1, lua/src/facts.rs).
  PARKED_CAPPED = FACTS.parked_capped

  -- Wake-ups (design note 27): a call that makes work ready (enqueue, a promotion, a release, a
  -- replay, an unparked tenant, a resumed queue) publishes once on the Redis pub/sub channel
  -- orq:{q}:wake, so that idle workers lease at once instead of at their next idle poll.

  -- The queue's virtual time given the stats hash's `vtime` field as read (a number; absent or
  -- garbage reads as 0).
  function vtime_of(stored)
    return num(stored, 0)
  end

  -- The queue's virtual time, read from the stats hash.
  function queue_vtime(c)
    return vtime_of(redis.call('HGET', c.K_STATS, 'vtime'))
  end

  -- Tell idle workers of the queue that work may be ready (design note 27): one PUBLISH per call on
  -- the channel orq:{q}:wake (KEYS[1] without its `task:`), the message empty. Workers that hear
  -- it lease at once instead of at their next idle poll; nothing depends on its delivery (a worker
  -- that misses it leases at its fallback poll). c.woken: whether this call has published.
  function wake(c)
    if not c.woken then
      c.woken = true
      redis.call('PUBLISH', string.sub(c.K_TASK, 1, -6) .. 'wake', '')
    end
  end

  -- Make a parked tenant eligible again, at the queue's current virtual time (no credit is stored
  -- up while parked). Parked tenants always have ready work.
  function unpark(c, tenant)
    if redis.call('ZREM', c.K_PARKED, tenant) == 1 then
      redis.call('ZADD', c.K_TENANTS, 'NX', fstr(queue_vtime(c)), tenant)
      wake(c)
    end
  end

  -- Unpark up to `bound` tenants whose parked-until time has come. Returns the count.
  function unpark_due(c, now, bound)
    local due = redis.call('ZRANGEBYSCORE', c.K_PARKED, '-inf', istr(now), 'LIMIT', '0', istr(bound))
    for i = 1, #due do
      unpark(c, due[i])
    end
    return #due
  end
end
