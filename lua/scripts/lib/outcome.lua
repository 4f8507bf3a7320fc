-- lib/outcome.lua: the end of a lease. Provides check_lease (the lease-holder check of heartbeat,
-- complete, fail and release), complete_task (one completion; complete and complete_batch) and
-- count_completed (a batch's completions of one tenant counted at once).
-- Needs: format, keys, counters, events, park, task
-- Per-call state: c.unpark_checked (the tenants whose parked state a completion checked) and
-- c.any_parked (whether the parked set held a tenant at the first check).

local count_completed, check_lease, complete_task
do
  -- Count a completion in the tenant's one-minute windows (fields c_win = window number,
  -- c_cur = completions in it, c_prev = in the window before), from which readers estimate the
  -- recent throughput with a sliding window: (c_prev x (1 - elapsed fraction) + c_cur) / 60 s.
  local function count_completion(c, tenant, now, n)
    local key = tenant_key(c, tenant)
    local win = math.floor(now / 60000)
    -- As the completions' lease checks read them (COMPLETE_TENANT_FIELDS), else read here.
    local f = tenant_read(c, tenant) or redis.call('HMGET', key, 'c_win', 'c_cur')
    local cur_win, cur = tonumber(f[1]), num(f[2], 0)
    if cur_win == win then
      hincr(c, key, 'c_cur', n)
    elseif cur_win == win - 1 then
      redis.call('HSET', key, 'c_win', istr(win), 'c_prev', istr(cur), 'c_cur', istr(n))
    else
      redis.call('HSET', key, 'c_win', istr(win), 'c_prev', '0', 'c_cur', istr(n))
    end
  end

  -- Count `n` completions of `tenant`'s leased tasks: the queue's total, the status counters
  -- (leased -> completed) and the tenant's completion window. When the completions' lease checks
  -- read the tenant's counters (COMPLETE_TENANT_FIELDS) and they hold plain integers, the tenant's
  -- are written at once, with its window, in one HSET of their new values (nothing in the call
  -- writes them between the read and this; one call instead of three HINCRBY, per tenant and
  -- call); else as before, with the window first and the counters deferred.
  function count_completed(c, tenant, now, n)
    count(c, c.K_STATS, 'total:completed', n)
    local f = tenant_read(c, tenant)
    local leased, done = f and stored_int(f[3]), f and stored_int(f[4])
    local win = math.floor(now / 60000)
    local cur_win = f and tonumber(f[1])
    local cur = f and (cur_win == win and stored_int(f[2]) or num(f[2], 0))
    if not (leased and done and cur) then
      count_completion(c, tenant, now, n)
      count_status(c, tenant, 'leased', 'completed', n)
      return
    end
    count(c, c.K_STATS, 'n:leased', -n)
    count(c, c.K_STATS, 'n:completed', n)
    local key = tenant_key(c, tenant)
    if cur_win == win then
      redis.call('HSET', key, 'c_cur', istr(cur + n), 'n:leased', istr(leased - n), 'n:completed', istr(done + n))
    else
      -- A new window: the last one's count moves to c_prev when it was the window before.
      local prev = cur_win == win - 1 and istr(cur) or '0'
      redis.call('HSET', key, 'c_win', istr(win), 'c_prev', prev, 'c_cur', istr(n), 'n:leased', istr(leased - n),
        'n:completed', istr(done + n))
    end
    -- What was read is stale now.
    c.tenant_reads[tenant] = nil
  end

  -- The lease-holder check shared by heartbeat, complete, fail and release. Reads the task fields
  -- `names` (default LEASE_FIELDS; they must include status and token, and tenant with
  -- `need_tenant`; an outcome they leave out is read when the lease has ended).
  -- Returns 'ok' and the fields when `token` holds the live lease; 'again' when the same token already ended the
  -- lease with `op` (a retried call whose reply was lost); otherwise an error reply to return.
  -- With `need_tenant`, a live lease whose task has no tenant, or whose tenant's keys are of
  -- another type, is CORRUPT (the transition would update the tenant's counters); a table of the
  -- tenant hash's fields for `need_tenant` has the check read them (`tenant_read`, lib/keys.lua).
  local LEASE_FIELDS = {'status', 'token', 'outcome', 'tenant'}
  function check_lease(c, id, token, op, need_tenant, names)
    local t, bad = fields(c, id, names or LEASE_FIELDS)
    if bad then
      return bad
    end
    if not t.status then
      return redis.error_reply('NOTFOUND task ' .. id)
    end
    if t.token ~= token then
      return redis.error_reply('STALE lease token superseded')
    end
    if t.status == 'leased' then
      if need_tenant then
        local e = tenant_error(c, t.tenant, nil, need_tenant ~= true and need_tenant or nil)
        if e then return e end
      end
      return 'ok', t
    end
    -- The lease has ended: how. A completed task's lease ended by its completion (complete
    -- writes no outcome); `names` may leave out the outcome, which is then read here.
    local outcome = t.outcome
    if t.status == 'completed' then
      outcome = 'completed'
    elseif outcome == nil then
      outcome = redis.call('HGET', task_key(c, id), F.outcome)
    end
    if outcome == 'cancelled' then
      return redis.error_reply('CANCELLED task was cancelled')
    end
    if outcome == op then
      return 'again'
    end
    return redis.error_reply('STALE lease ended (' .. (outcome or '?') .. ')')
  end

  -- The tenants whose parked-at-cap state `complete_task` has checked in this call are
  -- c.unpark_checked.
  -- The fields `complete_task` reads: the lease check's (its outcome only when the lease has
  -- ended) and what the completed event reports (updated_at is when the lease began).
  local COMPLETE_FIELDS = {'status', 'token', 'tenant', 'attempt', 'worker', 'updated_at'}
  -- The tenant hash's fields a completion's lease check reads (the type check of the hash):
  -- its completion window's and the counters a completion moves, for count_completed (nothing
  -- in the call writes them before; the order is count_completed's).
  local COMPLETE_TENANT_FIELDS = {'c_win', 'c_cur', 'n:leased', 'n:completed'}

  -- Complete task `id` under lease `token` with `result` (leased -> completed): the lease check,
  -- then the writes. `per_tenant` (optional, a batch: {ids = {}, tenants = {}, counts = {}}) collects
  -- the completions by tenant (tenants in first-seen order, counts by name) for the caller to count
  -- with `count_completed` once per tenant, and the completed ids for the caller to move from the
  -- leases set to the completed set in one call each; without it both happen here.
  -- Returns 'completed', 'again' (the same token completed it before), or an error reply
  -- (NOTFOUND, STALE, CANCELLED, CORRUPT; nothing written).
  function complete_task(c, id, token, result, now, per_tenant)
    local state, t = check_lease(c, id, token, 'completed', COMPLETE_TENANT_FIELDS, COMPLETE_FIELDS)
    if state ~= 'ok' then
      return state
    end
    if per_tenant then
      -- The index moves of a batch are made by the caller, one ZREM and one ZADD per call.
      per_tenant.ids[#per_tenant.ids + 1] = id
    else
      redis.call('ZREM', c.K_LEASES, id)
      redis.call('ZADD', c.K_COMPLETED, istr(now), id)
    end
    -- No outcome (a completed task's is 'completed', check_lease knows) and no finished_at (a
    -- completed task's is its updated_at, which nothing changes after this), and lease_exp is
    -- left: it is read only while the task is leased.
    local now_s = istr(now)
    redis.call('HSET', task_key(c, id), F.result, result, F.updated_at, now_s, F.status, 'completed')
    if per_tenant then
      -- The caller counts the batch's completions once per tenant (`count_completed`).
      local by_tenant = per_tenant.counts
      if not by_tenant[t.tenant] then
        per_tenant.tenants[#per_tenant.tenants + 1] = t.tenant
        by_tenant[t.tenant] = 0
      end
      by_tenant[t.tenant] = by_tenant[t.tenant] + 1
    else
      count_completed(c, t.tenant, now, 1)
    end
    -- set_status(id, t.tenant, 'leased', 'completed') without its counters (counted above or by
    -- the caller), with the status written above and the parked check made once per tenant and
    -- call (nothing in this call parks a tenant).
    -- One ZCARD spares the ZSCORE of every tenant when no tenant is parked (the common case).
    if not c.unpark_checked[t.tenant] then
      c.unpark_checked[t.tenant] = true
      if c.any_parked == nil then c.any_parked = redis.call('ZCARD', c.K_PARKED) > 0 end
      if c.any_parked and tonumber(redis.call('ZSCORE', c.K_PARKED, t.tenant)) == PARKED_CAPPED then
        unpark(c, t.tenant)
      end
    end
    local run = math.max(0, now - num(t.updated_at, now))
    emit(c, now, 'completed', id, t.tenant, num(t.attempt, 0), 'w', t.worker or '', 'run_ms', istr(run))
    return 'completed'
  end
end
