-- lib/counters.lua: integer counters in hashes. Provides hincr (an increment that repairs a
-- garbage counter), next_count, repaired (counts a repair in stats `total:repaired`), count /
-- defer_counts / flush_counts (increments applied at once or deferred to the end of a batch
-- call) and count_status (a task's move between the `n:<status>` counters).
-- Needs: format, keys
-- Per-call state: c.counts (the deferred increments, false when not deferred), c.status_fields
-- and c.tenant_keys (memos of counter fields and tenant hash keys).

local hincr, stored_int, next_count, repaired, defer_counts, count, flush_counts, count_status
do
  -- Add `delta` to the integer counter `field` of the hash `key` and return the new value. A
  -- counter that holds garbage (or would overflow) is reset to `delta` and the reset counted in
  -- the stats hash's `total:repaired`: a counter is never worth stopping a transition for. The caller
  -- has checked that `key` is a hash (or absent).
  function hincr(c, key, field, delta)
    -- The delta as a string: Redis formats a Lua number argument with printf.
    local v = redis.pcall('HINCRBY', key, field, istr(delta))
    if type(v) == 'table' and v.err then
      redis.call('HSET', key, field, istr(delta))
      if key ~= c.K_STATS or field ~= 'total:repaired' then
        hincr(c, c.K_STATS, 'total:repaired', 1)
      end
      return delta
    end
    return v
  end

  -- The value of an integer counter as read (`stored`: its text, or nil / false when absent,
  -- which counts 0), when HINCRBY would take it as it is and the result stays exact; nil when it
  -- holds anything else (garbage, which `hincr` repairs).
  function stored_int(stored)
    if not stored then
      return 0
    end
    local v = tonumber(stored)
    if v and v == math.floor(v) and v > -FACTS.exact_int_max and v < FACTS.exact_int_max and istr(v) == stored then
      return v
    end
    return nil
  end

  -- What `HINCRBY key field 1` would answer when the field holds `stored` (nil: absent), without
  -- the call when `stored` is a plain integer; otherwise (garbage) the call is made, through
  -- `hincr`, which repairs the field. The caller writes the returned value to the field.
  function next_count(c, key, field, stored)
    if stored == nil then
      return 1
    end
    local v = stored_int(stored)
    if v then
      return v + 1
    end
    return hincr(c, key, field, 1)
  end

  -- Count `n` repairs of corrupt or foreign state in the stats hash (see the header).
  function repaired(c, n)
    hincr(c, c.K_STATS, 'total:repaired', n)
  end

  -- Counter increments a batch script applies once at its end (`flush_counts`) instead of one
  -- HINCRBY per task, with keys and fields in first-use order so the writes are the same on every
  -- store (c.counts: the keys in order, and key -> its fields in order and field -> delta, in one
  -- table each). Off (false) until the script calls `defer_counts`; only counters that nothing
  -- reads before the flush are deferred (the status counters of `set_status`).
  function defer_counts(c)
    c.counts = {}
  end

  -- Add `delta` to the counter now, or at the flush when counters are deferred.
  function count(c, key, field, delta)
    local counts = c.counts
    if not counts then
      hincr(c, key, field, delta)
      return
    end
    local kc = counts[key]
    if not kc then
      kc = {}
      counts[key] = kc
      counts[#counts + 1] = key
    end
    local d = kc[field]
    if d == nil then
      kc[#kc + 1] = field
      d = 0
    end
    kc[field] = d + delta
  end

  -- Apply the deferred counter increments (nothing when none are deferred).
  function flush_counts(c)
    local counts = c.counts
    if not counts then return end
    for i = 1, #counts do
      local key = counts[i]
      local kc = counts[key]
      for j = 1, #kc do
        local d = kc[kc[j]]
        if d ~= 0 then
          hincr(c, key, kc[j], d)
        end
      end
    end
    c.counts = {}
  end

  -- Status -> its counter field `n:<status>` (c.status_fields), and tenant -> its hash key
  -- (c.tenant_keys), memoised for the call (building the strings per task was about 3 % of the
  -- Redis instructions of a leased task).
  local function status_field(c, status)
    local f = c.status_fields[status]
    if not f then
      f = 'n:' .. status
      c.status_fields[status] = f
    end
    return f
  end

  -- Move the count of `n` tasks (default 1) of `tenant` from status `old` (nil for new tasks) to
  -- `new`, in the queue's stats hash and the tenant's hash (deferred to the end of the call when
  -- counters are deferred). Batch scripts call it once per tenant with the batch's count.
  -- A tenant's hash counts no `queued` tasks: they are its ready lists' entries, which a reader
  -- sums (`ready_total`, lib/ready.lua), so a submit or a lease writes no counter of the tenant's
  -- for them (design note 55). The queue's stats hash counts every status.
  -- `tenant` may be nil when neither status needs it (a move between queued and nothing).
  function count_status(c, tenant, old, new, n)
    n = n or 1
    local tk = nil
    if (old and old ~= 'queued') or new ~= 'queued' then
      tk = c.tenant_keys[tenant]
      if not tk then
        tk = tenant_key(c, tenant)
        c.tenant_keys[tenant] = tk
      end
    end
    if old then
      local f = status_field(c, old)
      count(c, c.K_STATS, f, -n)
      if old ~= 'queued' then count(c, tk, f, -n) end
    end
    local f = status_field(c, new)
    count(c, c.K_STATS, f, n)
    if new ~= 'queued' then count(c, tk, f, n) end
  end
end
