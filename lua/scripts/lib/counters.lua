-- lib/counters.lua: integer counters in hashes. Provides hincr (an increment that repairs a
-- garbage counter), next_count, repaired (counts a repair in stats `total:repaired`), count /
-- defer_counts / flush_counts (increments applied at once or deferred to the end of a batch
-- call), count_status (a task's move between the `n:<status>` counters), and pre_read /
-- take_sets / flush_sets (counters read before the writes, written as values: one HSET per hash
-- and call instead of one HINCRBY per counter).
-- Needs: format, keys
-- Per-call state: c.counts (the deferred increments, false when not deferred), c.status_fields
-- and c.tenant_keys (memos of counter fields and tenant hash keys), c.pre (counters read before
-- the writes: key -> field -> value as stored, false when absent) and c.sets (the values to
-- write: key -> field -> value, with the keys and each key's fields in first-use order).

local hincr, next_count, repaired, defer_counts, count, flush_counts, count_status, pre_read, take_sets, flush_sets
do
  -- Counters read before the writes. A script that reads a hash's counters anyway (its first
  -- read of the stats hash, a tenant's admission read) records them with `pre_read`; an
  -- increment of such a counter then needs no HINCRBY: its new value is computed here and kept
  -- in c.sets, and all of a hash's values go out in one HSET (`flush_sets`; the stats hash's with
  -- the last event's id, events.lua). A value that is not a plain integer in Lua's exact range is
  -- left to HINCRBY, which repairs it (hincr), as before. Nothing else writes a counter: every
  -- change goes through hincr, so the value recorded stays the one the hash would hold.

  -- The value of a counter as stored (false: absent, so 0), or nil when it is not a plain
  -- integer of Lua's exact range.
  local function exact(stored)
    if stored == false then return 0 end
    local v = tonumber(stored)
    if v and v == math.floor(v) and v > -FACTS.exact_int_max and v < FACTS.exact_int_max
        and istr(v) == stored then
      return v
    end
    return nil
  end

  -- Record the counters `names` of hash `key` as the call read them before its first write:
  -- names[i]'s value is vals[from + i - 1] (false when absent). A counter recorded already keeps
  -- its value (a second read before the writes sees the same).
  function pre_read(c, key, names, vals, from)
    local pre = c.pre
    local pk = pre[key]
    if not pk then
      pk = {}
      pre[key] = pk
    end
    for i = 1, #names do
      local f = names[i]
      if pk[f] == nil then
        pk[f] = vals[from + i - 1] or false
      end
    end
  end

  -- Keep `value` for `field` of hash `key`, written by flush_sets (or take_sets' caller).
  local function set_later(c, key, field, value)
    local sets = c.sets
    local ks = sets[key]
    if not ks then
      ks = {}
      sets[key] = ks
      sets[#sets + 1] = key
    end
    if ks[field] == nil then
      ks[#ks + 1] = field
    end
    ks[field] = value
  end

  -- Add `delta` to a counter recorded by pre_read, without a call: the new value, or nil when
  -- the counter was not recorded or its value (or the sum) is not a plain exact integer.
  local function pre_add(c, key, field, delta)
    local pk = rawget(c, 'pre')
    pk = pk and pk[key]
    local stored = pk and pk[field]
    if stored == nil then return nil end
    local v = exact(stored)
    if not v then return nil end
    local new = v + delta
    if new <= -FACTS.exact_int_max or new >= FACTS.exact_int_max then return nil end
    local s = istr(new)
    pk[field] = s
    set_later(c, key, field, s)
    return new
  end

  -- The values kept for hash `key` as HSET arguments {field, value, ...} (nil when none),
  -- forgotten here: the caller writes them.
  function take_sets(c, key)
    local sets = rawget(c, 'sets')
    local ks = sets and sets[key]
    if not ks then return nil end
    sets[key] = false
    local args = {}
    for i = 1, #ks do
      args[2 * i - 1] = ks[i]
      args[2 * i] = ks[ks[i]]
    end
    return args
  end

  -- Write the values kept, one HSET per hash, in first-use order; those of hash `except` stay
  -- kept (the stats hash while the call's events are deferred: its values go with the last
  -- event's id).
  function flush_sets(c, except)
    local sets = rawget(c, 'sets')
    if not sets then return end
    local left = {}
    for i = 1, #sets do
      local key = sets[i]
      if key == except then
        if sets[key] then left[#left + 1] = key end
      else
        local args = take_sets(c, key)
        if args then
          redis.call('HSET', key, unpack(args))
        end
      end
    end
    for i = #sets, 1, -1 do
      sets[i] = nil
    end
    for i = 1, #left do
      sets[i] = left[i]
    end
  end

  -- Add `delta` to the integer counter `field` of the hash `key` and return the new value. A
  -- counter that holds garbage (or would overflow) is reset to `delta` and the reset counted in
  -- the stats hash's `total:repaired`: a counter is never worth stopping a transition for. The caller
  -- has checked that `key` is a hash (or absent). A counter recorded by pre_read is added to
  -- without a call (written by flush_sets).
  function hincr(c, key, field, delta)
    local new = pre_add(c, key, field, delta)
    if new then return new end
    -- The delta as a string: Redis formats a Lua number argument with printf.
    local v = redis.pcall('HINCRBY', key, field, istr(delta))
    if type(v) == 'table' and v.err then
      redis.call('HSET', key, field, istr(delta))
      if key ~= c.K_STATS or field ~= 'total:repaired' then
        hincr(c, c.K_STATS, 'total:repaired', 1)
      end
      v = delta
    end
    local pk = rawget(c, 'pre')
    pk = pk and pk[key]
    if pk and pk[field] ~= nil then
      pk[field] = istr(v)
    end
    return v
  end

  -- What `HINCRBY key field 1` would answer when the field holds `stored` (nil: absent), without
  -- the call when `stored` is a plain integer; otherwise (garbage) the call is made, through
  -- `hincr`, which repairs the field. The caller writes the returned value to the field.
  function next_count(c, key, field, stored)
    if stored == nil then
      return 1
    end
    local v = tonumber(stored)
    if v and v == math.floor(v) and v > -FACTS.exact_int_max and v < FACTS.exact_int_max and istr(v) == stored then
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

  -- Apply the deferred counter increments (nothing when none are deferred), and write the values
  -- kept (flush_sets), but the stats hash's while the call's events are deferred.
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
    flush_sets(c, c.ev_buf and c.K_STATS)
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
  function count_status(c, tenant, old, new, n)
    n = n or 1
    local tk = c.tenant_keys[tenant]
    if not tk then
      tk = tenant_key(c, tenant)
      c.tenant_keys[tenant] = tk
    end
    if old then
      local f = status_field(c, old)
      count(c, c.K_STATS, f, -n)
      count(c, tk, f, -n)
    end
    local f = status_field(c, new)
    count(c, c.K_STATS, f, n)
    count(c, tk, f, n)
  end
end
