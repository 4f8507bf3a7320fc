-- lib/maintenance.lua: the bounded upkeep several scripts run. Provides promote_due (due
-- scheduled/retrying tasks to ready), reap_expired (expired leases as failed attempts),
-- trim_finished (finished tasks past their retention), first_score (when to look again) and
-- read_first / read_old (their reads, made with pcall before a call's first write so that they
-- check the index's type).
-- Needs: format, keys, counters, events, task, ready, retry
-- Per-call state: none of its own.

local promote_due, reap_expired, trim_finished, first_score, read_first, read_old
do
  -- Whether a task read from an index can be acted on: its hash exists, its status is one of
  -- `statuses` (a set), and it has a tenant whose keys are of orq's types. An entry that fails is
  -- dropped from its index by the caller and counted as repaired (see the header).
  -- With `p`, the tenant's ready list of priority p is checked too (the caller appends to it).
  local function indexed_ok(c, t, statuses, p)
    return t ~= nil and t.status and statuses[t.status] and not tenant_error(c, t.tenant, p)
  end

  local WAITING = {scheduled = true, retrying = true}
  local LEASED = {leased = true}

  local PROMOTE_FIELDS = {'tenant', 'priority', 'status', 'attempt'}

  -- Move up to `bound` due scheduled/retrying tasks to their ready sets. Returns the count.
  function promote_due(c, now, bound)
    local due = redis.call('ZRANGEBYSCORE', c.K_SCHEDULED, '-inf', istr(now), 'LIMIT', '0', istr(bound))
    for i = 1, #due do
      local id = due[i]
      redis.call('ZREM', c.K_SCHEDULED, id)
      local t = fields(c, id, PROMOTE_FIELDS)
      if t and indexed_ok(c, t, WAITING, priority_of(t.priority)) then
        to_ready(c, id, t.tenant, priority_of(t.priority), t.status, now)
        emit(c, now, 'queued', id, t.tenant, num(t.attempt, 0), 'from', t.status)
      else
        repaired(c, 1)
      end
    end
    return #due
  end

  -- Expire up to `bound` leases whose deadline has passed: each counts as a failed attempt.
  -- `seed` in [0, 1) spreads the jitter of the retries. `expired`: the ids of those leases as the
  -- caller read them earlier in the call, at `now` (nil: read here). Returns the count.
  function reap_expired(c, now, bound, seed, expired)
    expired = expired or redis.call('ZRANGEBYSCORE', c.K_LEASES, '-inf', '(' .. istr(now), 'LIMIT', '0', istr(bound))
    for i = 1, #expired do
      local id = expired[i]
      redis.call('ZREM', c.K_LEASES, id)
      local t = fields(c, id, FAIL_FIELDS)
      if indexed_ok(c, t, LEASED) then
        local r = (seed + i * 0.6180339887498949) % 1
        hincr(c, c.K_STATS, 'total:reaped', 1)
        fail_attempt(c, id, t, now, 'lease expired', true, r, 'expired')
      else
        repaired(c, 1)
      end
    end
    return #expired
  end

  local TRIM_FIELDS = {'tenant', 'status'}

  -- Delete completed and cancelled tasks older than `retention_ms`, at most `bound` of each:
  -- the hash and the index entry go together. Returns the count.
  -- `olds`: {completed ids, cancelled ids} as read_old answered them earlier in the call, at
  -- `now` (nil: read here).
  function trim_finished(c, now, retention_ms, bound, olds)
    local n = 0
    local idx = {{c.K_COMPLETED, 'completed'}, {c.K_CANCELLED, 'cancelled'}}
    for j = 1, 2 do
      local key, status = idx[j][1], idx[j][2]
      local old = olds and olds[j] or redis.call('ZRANGEBYSCORE', key, '-inf', istr(now - retention_ms), 'LIMIT',
        '0', istr(bound))
      for i = 1, #old do
        local id = old[i]
        local t = fields(c, id, TRIM_FIELDS)
        if t and t.status == status and not tenant_error(c, t.tenant) then
          hincr(c, c.K_STATS, 'n:' .. status, -1)
          hincr(c, tenant_key(c, t.tenant), 'n:' .. status, -1)
          redis.call('DEL', task_key(c, id))
        else
          -- Only the entry goes: a hash that is not this index's task is left for inspection.
          repaired(c, 1)
        end
        redis.call('ZREM', key, id)
        n = n + 1
      end
    end
    return n
  end

  -- The score of the earliest entry of the ZSET `key` (-1 when it is empty), read with pcall: nil
  -- and the CORRUPT reply when the key holds another type.
  function read_first(key)
    local r = redis.pcall('ZRANGE', key, '0', '0', 'WITHSCORES')
    if r.err then
      return nil, type_error(key, 'zset') or redis.error_reply(r.err)
    end
    return #r > 0 and tonumber(r[2]) or -1
  end

  -- The entries of the finished index `key` older than `retention_ms` at `now` that
  -- trim_finished would delete (at most `bound`), read with pcall: nil and the CORRUPT reply when
  -- the key holds another type.
  function read_old(key, now, retention_ms, bound)
    local r = redis.pcall('ZRANGEBYSCORE', key, '-inf', istr(now - retention_ms), 'LIMIT', '0', istr(bound))
    if r.err then
      return nil, type_error(key, 'zset') or redis.error_reply(r.err)
    end
    return r
  end

  -- Score of the earliest entry of a ZSET, or -1 when it is empty.
  function first_score(key)
    local r = redis.call('ZRANGE', key, '0', '0', 'WITHSCORES')
    if #r == 0 then
      return -1
    end
    return tonumber(r[2])
  end
end
