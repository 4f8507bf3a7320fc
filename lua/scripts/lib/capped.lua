-- lib/capped.lua: how many of a queue's tenants have a submit cap. Provides CAPPED (the stats
-- hash's field), capped_parse (the count as stored, nil when unknown) and capped_changed
-- (configure's update when a tenant's max_queued appears or goes).
-- Needs: format
-- Per-call state: none.
--
-- The stats hash's `capped` field counts the tenants whose hash has a max_queued. configure, the
-- only call that writes max_queued, keeps it; while it is 0, a submit reads a tenant's hash only
-- when the tenant had no ready task in a list it adds to (enqueue.lua). It is exact from a queue's
-- first tenant on: a queue no tenant is known to has no capped tenant (a tenant hash with a
-- max_queued is always listed in the known tenants, and the simulator checks it), so the first
-- configure of a tenant, or the first submit, of such a queue starts it. A queue from before the
-- field (absent), or a damaged count (garbage, or a decrement below 0), is unknown: every submit
-- reads each of its tenants' hashes, as it did before the field.

local CAPPED, capped_parse, capped_changed
do
  CAPPED = 'capped'

  -- The stored count: a whole number >= 0, or nil (unknown).
  function capped_parse(v)
    local x = tonumber(v)
    if not x or x < 0 or x ~= math.floor(x) then
      return nil
    end
    return x
  end

  -- A tenant's max_queued appeared (`delta` 1), went (-1) or neither (0). Called before the
  -- known tenants list the tenant; the caller has checked the stats hash's and the known
  -- tenants' types.
  function capped_changed(c, delta)
    local v = redis.call('HGET', c.K_STATS, CAPPED)
    local x = capped_parse(v)
    if x then
      if x + delta < 0 then
        redis.call('HDEL', c.K_STATS, CAPPED)
      elseif delta ~= 0 then
        redis.call('HINCRBY', c.K_STATS, CAPPED, istr(delta))
      end
    elseif not v and redis.call('ZCARD', c.K_KNOWN) == 0 then
      -- No tenant is known, so none had a cap: the count starts here, exact.
      redis.call('HSET', c.K_STATS, CAPPED, istr(math.max(delta, 0)))
    end
  end
end
