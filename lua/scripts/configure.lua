-- configure: change a queue's settings (pause, resume, starvation bound) or a tenant's share and
-- limits, or drop an unused queue's keys. Not a task transition; it emits one event so that
-- dashboards see the change (mode drop emits none: it deletes the stream).
--
-- Transition: none for tasks. Pausing stops leasing (submits, promotion and reaping go on);
-- resuming lets leasing go on. A tenant's new rate limit starts with a full bucket. Dropping
-- deletes a queue that holds no queued, scheduled, retrying, leased or dead task: its finished
-- (completed, cancelled) tasks, at most ARGV[2] a call, then its tenants' hashes, then the queue's
-- own keys. Idempotency keys are left to their TTL.
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:          prefix of HASH orq:{q}:task:<id> (mode drop)
--   KEYS[3]  orq:{q}:tenants        ZSET tenants with ready work
--   KEYS[4]  orq:{q}:scheduled      ZSET scheduled and retrying tasks (mode drop)
--   KEYS[5]  orq:{q}:leases         ZSET leased tasks (mode drop)
--   KEYS[6]  orq:{q}:dead           ZSET dead tasks (mode drop)
--   KEYS[7]  orq:{q}:completed      ZSET completed tasks (mode drop)
--   KEYS[8]  orq:{q}:cancelled      ZSET cancelled tasks (mode drop)
--   KEYS[10] orq:{q}:tenant:        prefix of HASH orq:{q}:tenant:<tenant> (weight, max_inflight,
--                                   max_queued, rate_per_s, burst, tokens, tokens_at)
--   KEYS[11] orq:{q}:stats          HASH counters, capped (tenants with a max_queued, lib/capped.lua)
--   KEYS[12] orq:{q}:events         STREAM
--   KEYS[13] orq:{q}:known_tenants  ZSET tenant names
--   KEYS[14] orq:{q}:config         HASH paused (0|1), aging_step_ms, defaults (JSON)
--   KEYS[15] orq:{q}:parked         ZSET tenants held back by a limit (a tenant change unparks)
--   KEYS[16] orq:{q}:workers        ZSET workers seen (mode drop)
--
-- ARGV, mode queue:
--   ARGV[1]  'queue'
--   ARGV[2]  string   paused: '1' pause, '0' resume, '' keep
--   ARGV[3]  integer  aging_step_ms: 0 strict priority, 1..FACTS.aging_step_ms_max the
--                     starvation bound step, '' keep. It orders the ready tasks as lease reads
--                     them, so a change applies at once to the tasks already queued (lib/lease.lua,
--                     pop_ready)
--   ARGV[4]  bytes    defaults: the queue's default task options as JSON (validated by the
--                     caller, at most 4096 bytes), '' keep, '-' remove
-- ARGV, mode tenant:
--   ARGV[1]  'tenant'
--   ARGV[2]  string   tenant (validated by the caller)
--   ARGV[3]  number   weight in (0, 1000], '' keep, '-' back to 1
--   ARGV[4]  integer  max_inflight 1..1000000 live leases, '' keep, '-' no cap
--   ARGV[5]  integer  max_queued 0..1000000000 waiting tasks, '' keep, '-' no cap
--   ARGV[6]  number   rate_per_s in (0, 1000000] leases per second, '' keep, '-' no limit
--   ARGV[7]  integer  burst 1..1000000 tokens, '' keep, '-' default (max(1, ceil(rate_per_s)))
-- ARGV, mode drop:
--   ARGV[1]  'drop'
--   ARGV[2]  integer  bound 1..10000: most finished tasks (and then tenant hashes) deleted by
--                     this call
--
-- Returns: {now_ms, fields} with the queue's config hash or the tenant's hash after the change,
--   flat (HGETALL). Mode drop: {now_ms, 'dropped', deleted} when the queue's keys are gone;
--   {now_ms, 'more', deleted} when it deleted `bound` finished tasks or tenant hashes and more
--   are left (call again); {now_ms, 'busy', {queued, scheduled, retrying, leased, dead}} (the
--   stats hash's counts; nothing deleted) when it holds a task that is not finished, or a dead
--   one. `deleted` counts the finished tasks this call deleted.
-- Errors: INVALID <field ...> (nothing written); CORRUPT <key> (a key it would read or write holds another Redis type than orq's; nothing
--   written).
-- Emits: paused / resumed / configured (queue mode), tenant_configured (tenant mode).
-- Publishes: the queue's wake-up on resume, and when a tenant's new limits unpark it (lib/park.lua, wake).
--
-- Uses: ctx, format, args, keys, counters, events, park, capped

local c = new_ctx(KEYS)

local now = now_ms()
local mode = ARGV[1]

-- Validate one optional field: '' keep, '-' clear, else a number in [lo, hi] (integer when int).
local function opt(v, name, lo, hi, int)
  if v == nil or v == '' or v == '-' then
    return v or '', nil
  end
  local x, e
  if int then
    x, e = arg_int(v, name, lo, hi)
  else
    x, e = arg_num(v, name, lo, hi)
    if x and x <= 0 then
      x, e = nil, 'INVALID ' .. name .. ' must be greater than 0'
    end
  end
  if not x then return nil, e end
  return x, nil
end

local bad = check_keys(c, {3, 11, 12, 13, 14, 15})
if bad then return bad end

-- Mode drop's phases: refuse a queue that holds work, delete a bounded batch of finished tasks,
-- then of tenant hashes, then the queue's keys.
local function drop_busy()
  local held = redis.call('ZCARD', c.K_TENANTS) + redis.call('ZCARD', c.K_PARKED)
    + redis.call('ZCARD', c.K_SCHEDULED) + redis.call('ZCARD', c.K_LEASES)
    + redis.call('ZCARD', c.K_DEAD)
  if held == 0 then return nil end
  local n = redis.call('HMGET', c.K_STATS, 'n:queued', 'n:scheduled', 'n:retrying', 'n:leased',
    'n:dead')
  for i = 1, 5 do n[i] = num(n[i], 0) end
  return {now, 'busy', n}
end

-- The counters move with the tasks (queue and tenant `n:<status>`), so a drop that stops
-- half-way (answer 'more') leaves the counts true.
local function drop_finished(bound)
  local deleted = 0
  for _, finished in ipairs({{c.K_COMPLETED, 'completed'}, {c.K_CANCELLED, 'cancelled'}}) do
    local index, field = finished[1], 'n:' .. finished[2]
    local ids = redis.call('ZRANGE', index, '0', istr(bound - deleted - 1))
    for i = 1, #ids do
      local key = task_key(c, ids[i])
      local tenant = redis.pcall('HGET', key, F.tenant)
      if type(tenant) == 'string' and tenant ~= '' and not tenant_error(c, tenant) then
        hincr(c, tenant_key(c, tenant), field, -1)
      end
      redis.call('DEL', key)
    end
    if #ids > 0 then
      redis.call('ZREM', index, unpack(ids))
      hincr(c, c.K_STATS, field, -#ids)
    end
    deleted = deleted + #ids
    if deleted >= bound then break end
  end
  return deleted
end

local function drop_tenants(bound)
  local names = redis.call('ZRANGE', c.K_KNOWN, '0', istr(bound - 1))
  for i = 1, #names do
    redis.call('DEL', tenant_key(c, names[i]))
  end
  if #names > 0 then redis.call('ZREM', c.K_KNOWN, unpack(names)) end
  return #names
end

if mode == 'drop' then
  local bound, e = arg_int(ARGV[2], 'bound', 1, 10000)
  if not bound then return redis.error_reply(e) end
  bad = check_keys(c, {4, 5, 6, 7, 8, 16})
  if bad then return bad end
  local busy = drop_busy()
  if busy then return busy end
  local deleted = drop_finished(bound)
  if deleted >= bound then return {now, 'more', deleted} end
  if drop_tenants(bound - deleted) >= bound - deleted then return {now, 'more', deleted} end
  redis.call('DEL', c.K_TENANTS, c.K_SCHEDULED, c.K_LEASES, c.K_DEAD, c.K_COMPLETED,
    c.K_CANCELLED, c.K_STATS, c.K_EVENTS, c.K_KNOWN, c.K_CONFIG, c.K_PARKED, c.K_WORKERS)
  return {now, 'dropped', deleted}
end

if mode == 'queue' then
  local paused = ARGV[2] or ''
  if paused ~= '' and paused ~= '0' and paused ~= '1' then
    return redis.error_reply('INVALID paused must be 0 or 1')
  end
  local step, e = opt(ARGV[3], 'aging_step_ms', 0, FACTS.aging_step_ms_max, true)
  if step == nil then return redis.error_reply(e) end
  if step == '-' then return redis.error_reply('INVALID aging_step_ms must be a number') end
  local defaults = ARGV[4] or ''
  if string.len(defaults) > 4096 then
    return redis.error_reply('INVALID defaults must be at most 4096 bytes')
  end
  local kind = 'configured'
  if paused ~= '' then
    redis.call('HSET', c.K_CONFIG, 'paused', paused)
    if paused == '1' then kind = 'paused' else kind = 'resumed' wake(c) end
  end
  if step ~= '' then
    redis.call('HSET', c.K_CONFIG, 'aging_step_ms', istr(step))
  end
  if defaults == '-' then
    redis.call('HDEL', c.K_CONFIG, 'defaults')
  elseif defaults ~= '' then
    redis.call('HSET', c.K_CONFIG, 'defaults', defaults)
  end
  emit(c, now, kind, '', '', 0)
  return {now, redis.call('HGETALL', c.K_CONFIG)}
elseif mode == 'tenant' then
  local tenant = ARGV[2]
  if not tenant or tenant == '' then return redis.error_reply('INVALID tenant is required') end
  local spec = {
    {'weight', 3, 0, 1000, false},
    {'max_inflight', 4, 1, 1000000, true},
    {'max_queued', 5, 0, 1000000000, true},
    {'rate_per_s', 6, 0, 1000000, false},
    {'burst', 7, 1, 1000000, true},
  }
  local vals = {}
  for i = 1, #spec do
    local f = spec[i]
    local v, e = opt(ARGV[f[2]], f[1], f[3], f[4], f[5])
    if v == nil then return redis.error_reply(e) end
    vals[f[1]] = v
  end
  local key = tenant_key(c, tenant)
  bad = type_error(key, 'hash')
  if bad then return bad end
  local had_cap = redis.call('HGET', key, 'max_queued') ~= false
  for i = 1, #spec do
    local name = spec[i][1]
    local v = vals[name]
    if v == '-' then
      redis.call('HDEL', key, name)
    elseif v ~= '' then
      if spec[i][5] then
        redis.call('HSET', key, name, istr(v))
      else
        redis.call('HSET', key, name, fstr(v))
      end
    end
  end
  if vals.rate_per_s ~= '' or vals.burst ~= '' then
    -- A new rate limit starts with a full bucket.
    redis.call('HDEL', key, 'tokens', 'tokens_at')
    local rate = num(redis.call('HGET', key, 'rate_per_s'), nil)
    if rate and not redis.call('HGET', key, 'burst') then
      redis.call('HSET', key, 'burst', istr(math.max(1, math.ceil(rate))))
    end
  end
  -- The queue's count of capped tenants (lib/capped.lua), before the tenant is listed.
  local has_cap = redis.call('HGET', key, 'max_queued') ~= false
  capped_changed(c, (has_cap and 1 or 0) - (had_cap and 1 or 0))
  redis.call('ZADD', c.K_KNOWN, '0', tenant)
  -- New limits are judged by the next lease call, not by the reason the tenant was parked.
  unpark(c, tenant)
  emit(c, now, 'tenant_configured', '', tenant, 0)
  return {now, redis.call('HGETALL', key)}
end
return redis.error_reply('INVALID mode must be queue, tenant or drop')
