-- lib/status.lua: a task's status. Provides set_status (the status field and its counters, and
-- the unpark of a tenant whose capped lease ends).
-- Needs: keys, counters, park
-- Per-call state: none of its own (counters.lua's, park.lua's).

local set_status
do
  -- Move a task's status counter from `old` (may be nil for a new task) to `new` and record the
  -- status on the task (a queued task stores none: F). A lease that ends unparks its tenant when
  -- the tenant was parked at its max_inflight.
  function set_status(c, id, tenant, old, new)
    count_status(c, tenant, old, new)
    if new == 'queued' then
      redis.call('HDEL', task_key(c, id), F.status)
    else
      redis.call('HSET', task_key(c, id), F.status, new)
    end
    if old == 'leased' and tonumber(redis.call('ZSCORE', c.K_PARKED, tenant)) == PARKED_CAPPED then
      unpark(c, tenant)
    end
  end
end
