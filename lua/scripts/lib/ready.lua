-- lib/ready.lua: the ready lists and their mask. Provides to_ready (a task onto its tenant's ready
-- list), from_ready (a queued task off it), mark_ready, the mask helpers (rp_parse, rp_has,
-- rp_any, rp_get, rp_store, rp_exact, POW2) that lease and cancel use to touch only non-empty
-- lists, and ready_total (a tenant's queued tasks, counted from its lists).
-- Needs: format, keys, counters, park, status
-- Per-call state: c.tenant_rps (tenant -> its mask as last read or stored in this call).

local POW2, rp_parse, rp_has, rp_any, rp_store, mark_ready, to_ready, rp_exact, from_ready, ready_total
do
  -- The ready-list mask: bit p of the tenant hash's `rp` field is set exactly while the tenant's
  -- ready list of priority p holds ids, so lease and cancel touch only those lists. Every push
  -- sets its bit (mark_ready) and every call that empties a list clears it (a lease pass, cancel).
  -- An absent or garbage `rp` (a tenant from before the mask, or a damaged field) is "unknown":
  -- lease then looks at all ten lists and stores the exact mask.
  local RP_UNKNOWN = -1
  POW2 = {[0] = 1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
  -- c.tenant_rps: tenant -> the mask as stored (RP_UNKNOWN when absent or garbage), memoised for
  -- the call.

  function rp_parse(v)
    local m = tonumber(v)
    if not m or m < 0 or m > 1023 or m ~= math.floor(m) then
      return RP_UNKNOWN
    end
    return m
  end

  -- Whether bit p of mask m is set (an unknown mask has every bit set).
  function rp_has(m, p)
    return m == RP_UNKNOWN or math.floor(m / POW2[p]) % 2 == 1
  end

  -- Whether mask m is known and marks a list that holds ids. Such a tenant has ready work, so it
  -- is in the tenants set or the parked set (every call that fills a list of an idle tenant puts
  -- it in one of them, and every call that empties its last list takes it out: the simulator's
  -- rules check it), and a call that adds ready tasks need not look.
  function rp_any(m)
    return m > 0
  end

  -- The tenant's stored mask (the caller has checked the tenant hash's type).
  local function rp_get(c, tenant)
    local m = c.tenant_rps[tenant]
    if m == nil then
      m = rp_parse(redis.call('HGET', tenant_key(c, tenant), 'rp'))
      c.tenant_rps[tenant] = m
    end
    return m
  end

  -- Store the tenant's mask `m` (an exact one) when it differs from the stored one.
  function rp_store(c, tenant, m)
    if rp_get(c, tenant) ~= m then
      redis.call('HSET', tenant_key(c, tenant), 'rp', istr(m))
      c.tenant_rps[tenant] = m
    end
  end

  -- Record that the tenant's ready list of priority p is about to receive ids.
  function mark_ready(c, tenant, p)
    local m = rp_get(c, tenant)
    if not rp_has(m, p) then
      rp_store(c, tenant, m + POW2[p])
    end
  end

  -- Put a task at the tail of its tenant's ready list of its priority (status queued), and make the
  -- tenant eligible for fair share at the current virtual time if it was idle (a parked tenant
  -- stays parked). The caller has checked the list's type (tenant_error with the priority).
  function to_ready(c, id, tenant, priority, old, now)
    wake(c)
    mark_ready(c, tenant, priority)
    redis.call('RPUSH', ready_key(c, tenant, priority), id)
    if not redis.call('ZSCORE', c.K_PARKED, tenant) then
      redis.call('ZADD', c.K_TENANTS, 'NX', fstr(queue_vtime(c)), tenant)
    end
    redis.call('HSET', task_key(c, id), F.updated_at, istr(now))
    set_status(c, id, tenant, old, 'queued')
  end

  -- The exact ready-list mask of `tenant`, read from the lists (LLEN) where `m` is unknown. With
  -- `count`, a list of another type is counted in `total:repaired` (it counts as empty either
  -- way: nothing is leased from it, and submits to it are refused).
  function rp_exact(c, tenant, m, count)
    if m ~= RP_UNKNOWN then
      return m
    end
    m = 0
    for p = 0, 9 do
      local n = redis.pcall('LLEN', ready_key(c, tenant, p))
      if type(n) ~= 'number' then
        if count then repaired(c, 1) end
      elseif n > 0 then
        m = m + POW2[p]
      end
    end
    return m
  end

  -- How many ids the ready lists of `tenant` hold: its queued tasks (a tenant's hash counts none,
  -- lib/counters.lua). `m` is its mask as stored (an unknown mask reads all ten lists); a list of
  -- another type counts 0. One LLEN per list that holds ids.
  function ready_total(c, tenant, m)
    local total = 0
    for p = 0, 9 do
      if rp_has(m, p) then
        local n = redis.pcall('LLEN', ready_key(c, tenant, p))
        if type(n) == 'number' then total = total + n end
      end
    end
    return total
  end

  -- Remove a queued task of priority `priority` from its tenant's ready list (LREM: O(N) in the
  -- list's length), dropping the tenant from the fair-share set (or the parked set) when it has
  -- no ready work left.
  function from_ready(c, id, tenant, priority)
    local key = ready_key(c, tenant, priority)
    redis.call('LREM', key, '1', id)
    local m = rp_exact(c, tenant, rp_get(c, tenant))
    if redis.call('LLEN', key) == 0 and rp_has(m, priority) then
      m = m - POW2[priority]
    end
    rp_store(c, tenant, m)
    if m == 0 then
      redis.call('ZREM', c.K_TENANTS, tenant)
      redis.call('ZREM', c.K_PARKED, tenant)
    end
  end
end
