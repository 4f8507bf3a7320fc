-- lease: hand up to N ready tasks to a worker.
--
-- Transition: queued -> leased (and, first, scheduled/retrying -> queued for due tasks, and
-- leased -> retrying/dead for expired leases, each bounded).
-- Tenants are served by virtual time (start-time fair queuing with per-tenant weights, default 1):
-- the backlogged tenant with the smallest virtual time goes next and its time advances by
-- 1/weight; a tenant that becomes backlogged again starts at the queue's current virtual time.
-- Within a tenant the most urgent priority goes first, FIFO within a priority.
-- The lease token is "<epoch>-<random>": epoch grows by one with every lease of the task (the
-- fencing epoch given to handlers), the random part comes from the caller.
--
-- KEYS: the queue key set (lib.lua); this script uses
--   KEYS[1]  orq:{q}:task:      prefix of HASH orq:{q}:task:<id>
--   KEYS[2]  orq:{q}:ready:     prefix of ZSET orq:{q}:ready:<tenant>
--   KEYS[3]  orq:{q}:tenants    ZSET tenants with ready work, score=virtual time
--   KEYS[4]  orq:{q}:scheduled  ZSET score=run_at ms
--   KEYS[5]  orq:{q}:leases     ZSET score=lease deadline ms
--   KEYS[6]  orq:{q}:dead       ZSET score=time of death ms
--   KEYS[10] orq:{q}:tenant:    prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats      HASH counters, vtime
--   KEYS[12] orq:{q}:events     STREAM
--
-- ARGV:
--   ARGV[1]  string   worker id (recorded on the task and in events)
--   ARGV[2]  integer  n, most tasks to lease (1..100)
--   ARGV[3]  string   random token bits from the caller (hex, 1..32 chars)
--   ARGV[4]  number   jitter seed in [0, 1) for retries of reaped leases
--   ARGV[5]  integer  promote bound: most due scheduled tasks moved per call (0..1000)
--   ARGV[6]  integer  reap bound: most expired leases reaped per call (0..1000)
--
-- Returns: {now_ms, {task, ...}, next_ms} where each task is {expires_at_ms, fields} (fields is the
--   task hash as a flat name/value array, lease included), and next_ms is now_ms when ready work
--   is left, else the earliest run_at of a scheduled task, else -1.
-- Errors: INVALID <message>.
-- Emits: queued (promoted), retrying / dead (reaped), leased.

local LEASE_MAX = 100

local now = now_ms()
local worker = ARGV[1]
local n, e = arg_int(ARGV[2], 'n', 1, LEASE_MAX)
if not n then return redis.error_reply(e) end
local bits = ARGV[3]
if not string.match(bits, '^[0-9a-f]+$') or string.len(bits) > 32 then
  return redis.error_reply('INVALID token bits must be 1..32 lowercase hex digits')
end
local seed
seed, e = arg_num(ARGV[4], 'seed', 0, 1)
if not seed then return redis.error_reply(e) end
local promote_bound
promote_bound, e = arg_int(ARGV[5], 'promote bound', 0, 1000)
if not promote_bound then return redis.error_reply(e) end
local reap_bound
reap_bound, e = arg_int(ARGV[6], 'reap bound', 0, 1000)
if not reap_bound then return redis.error_reply(e) end
if worker == '' then return redis.error_reply('INVALID worker id is required') end

if promote_bound > 0 then promote_due(now, promote_bound) end
if reap_bound > 0 then reap_expired(now, reap_bound, seed) end

local out = {}
-- Each pass either leases a task or drops a tenant with no ready work, so 2n passes suffice.
for _ = 1, 2 * n do
  if #out >= n then break end
  local head = redis.call('ZRANGE', K_TENANTS, 0, 0, 'WITHSCORES')
  if #head == 0 then break end
  local tenant, vt = head[1], tonumber(head[2])
  local popped = redis.call('ZPOPMIN', ready_key(tenant))
  if #popped == 0 then
    redis.call('ZREM', K_TENANTS, tenant)
  else
    local id = popped[1]
    local weight = tonumber(redis.call('HGET', tenant_key(tenant), 'weight')) or 1
    if weight <= 0 then weight = 1 end
    redis.call('HSET', K_STATS, 'vtime', fstr(vt))
    if redis.call('ZCARD', ready_key(tenant)) == 0 then
      redis.call('ZREM', K_TENANTS, tenant)
    else
      redis.call('ZADD', K_TENANTS, fstr(vt + 1 / weight), tenant)
    end
    local key = task_key(id)
    local t = fields(id, {'lease_ms', 'status'})
    if t.status == 'queued' then
      local epoch = redis.call('HINCRBY', key, 'epoch', 1)
      local attempt = redis.call('HINCRBY', key, 'attempt', 1)
      local exp = now + (tonumber(t.lease_ms) or 30000)
      redis.call('HSET', key, 'token', istr(epoch) .. '-' .. bits, 'worker', worker,
        'lease_exp', istr(exp), 'leased_at', istr(now), 'updated_at', istr(now), 'outcome', '')
      redis.call('ZADD', K_LEASES, istr(exp), id)
      set_status(id, tenant, 'queued', 'leased')
      emit(now, 'leased', id, tenant, attempt, {'w', worker, 'epoch', istr(epoch)})
      out[#out + 1] = {exp, redis.call('HGETALL', key)}
    end
  end
end

local next_ms = -1
if redis.call('ZCARD', K_TENANTS) > 0 then
  next_ms = now
else
  next_ms = first_score(K_SCHEDULED)
end
return {now, out, next_ms}
