-- stats: counts of one queue, overall and per tenant.
--
-- Transition: none (a read).
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:          prefix of HASH orq:{q}:task:<id>
--   KEYS[2]  orq:{q}:ready:         prefix of LIST orq:{q}:ready:<priority>:<tenant>
--   KEYS[3]  orq:{q}:tenants        ZSET tenants with ready work, score=virtual time
--   KEYS[4]  orq:{q}:scheduled      ZSET
--   KEYS[5]  orq:{q}:leases         ZSET
--   KEYS[6]  orq:{q}:dead           ZSET
--   KEYS[7]  orq:{q}:completed      ZSET
--   KEYS[8]  orq:{q}:cancelled      ZSET
--   KEYS[10] orq:{q}:tenant:        prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats          HASH counters (n:<status> current, total:<event> cumulative)
--   KEYS[13] orq:{q}:known_tenants  ZSET tenant names
--   KEYS[14] orq:{q}:config         HASH paused, aging_step_ms
--   KEYS[15] orq:{q}:parked         ZSET tenants held back by a limit
--
-- ARGV:
--   ARGV[1]  integer  most tenants reported (0..10000), in name order
--   ARGV[2]  integer  optional: most tenants with ready work whose ready lists' heads are read for
--                     the oldest ready task (0..1000, absent = 0: not read), in the order of
--                     the tenants ZSET (lowest virtual time first)
--   ARGV[3]  integer  optional: the position of the first tenant reported, in name order
--                     (0..1000000000, absent = 0): a page of ARGV[1] tenants from there
--   ARGV[4]  string   optional: report only this tenant (when the queue knows it), not a page
--
-- Returns: {now_ms, stats_fields, {tenant_entry, ...}, index_sizes, tenants_total, config_fields,
--   oldest}
--   stats_fields: the stats hash, flat;
--   tenants_total: the tenants the queue knows (for paging);
--   tenant_entry: {tenant, tenant_hash_fields_flat, ready_count, parked}; ready_count is the
--   tenant's queued tasks (its ready lists' entries: its hash counts none); parked is -1 when the
--   tenant is not held back, FACTS.parked_capped (2^53 - 1) when parked at its max_inflight,
--   else the ms its next rate-limit token is due;
--   index_sizes: {scheduled, leases, dead, completed, cancelled} entry counts (ZCARD);
--   config_fields: the queue's config hash, flat;
--   oldest: {ready_since_ms, tenants_read, tenants_with_ready_work}: the earliest run_at (ms; a
--   task with none, its created_at) of the heads of the ready lists read, -1 when none was read.
--   A tenant held back by a limit is not in the tenants ZSET and is not read. The work is bounded
--   by ARGV[2] x 10 list heads; it is exact when no more tenants have ready work.
-- Errors: INVALID; CORRUPT <key> (a queue key holds another Redis type). A tenant whose own keys
--   hold another type is reported with no fields and no ready tasks.
-- Emits: nothing.
--
-- Uses: ctx, format, args, keys

local c = new_ctx(KEYS)

local now = now_ms()
local bad = check_keys(c, {4, 5, 6, 7, 8, 11, 13, 14, 15})
if bad then return bad end
local max, e = arg_int(ARGV[1], 'tenants', 0, 10000)
if not max then return redis.error_reply(e) end
local scan = 0
if ARGV[2] ~= nil then
  scan, e = arg_int(ARGV[2], 'oldest tenants', 0, 1000)
  if not scan then return redis.error_reply(e) end
  if scan > 0 then
    bad = check_keys(c, {3})
    if bad then return bad end
  end
end
local offset = 0
if ARGV[3] ~= nil and ARGV[3] ~= '' then
  offset, e = arg_int(ARGV[3], 'offset', 0, 1000000000)
  if not offset then return redis.error_reply(e) end
end
local only = ARGV[4]
local tenants = {}
if max > 0 then
  local names
  if only ~= nil and only ~= '' then
    names = redis.call('ZSCORE', c.K_KNOWN, only) and {only} or {}
  else
    names = redis.call('ZRANGE', c.K_KNOWN, istr(offset), istr(offset + max - 1))
  end
  for i = 1, #names do
    local t = names[i]
    local h = redis.pcall('HGETALL', tenant_key(c, t))
    if h.err then h = {} end
    -- Its ten ready lists (a list of another type counts 0).
    local ready = 0
    for p = 0, 9 do
      local len = redis.pcall('LLEN', ready_key(c, t, p))
      if type(len) == 'number' then ready = ready + len end
    end
    tenants[i] = {t, h, ready, tonumber(redis.call('ZSCORE', c.K_PARKED, t)) or -1}
  end
end
local sizes = {redis.call('ZCARD', c.K_SCHEDULED), redis.call('ZCARD', c.K_LEASES),
  redis.call('ZCARD', c.K_DEAD), redis.call('ZCARD', c.K_COMPLETED), redis.call('ZCARD', c.K_CANCELLED)}
-- The oldest ready task among the heads (index 0: lists are pushed at the tail, leased from the
-- head) of the ready lists of the first `scan` tenants with ready work.
local oldest = {-1, 0, 0}
if scan > 0 then
  local names = redis.call('ZRANGE', c.K_TENANTS, 0, scan - 1)
  local since = -1
  for i = 1, #names do
    for p = 0, 9 do
      local h = redis.pcall('LRANGE', ready_key(c, names[i], p), '0', '0')
      local head = type(h) == 'table' and h[1]
      if type(head) == 'string' then
        local f = redis.pcall('HMGET', task_key(c, head), F.run_at, F.created_at)
        local at = type(f) == 'table' and (tonumber(f[1]) or tonumber(f[2]))
        if at and (since < 0 or at < since) then since = at end
      end
    end
  end
  oldest = {since, #names, redis.call('ZCARD', c.K_TENANTS)}
end
return {now, redis.call('HGETALL', c.K_STATS), tenants, sizes, redis.call('ZCARD', c.K_KNOWN),
  redis.call('HGETALL', c.K_CONFIG), oldest}
