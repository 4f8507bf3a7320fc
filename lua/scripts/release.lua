-- release: give a leased task back without spending an attempt (graceful worker shutdown).
--
-- Transition: leased -> queued (attempt is decremented, so the aborted run does not count).
-- Idempotent under a retried call with the same token.
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:       prefix of HASH orq:{q}:task:<id>
--   KEYS[2]  orq:{q}:ready:      prefix of LIST orq:{q}:ready:<priority>:<tenant>
--   KEYS[3]  orq:{q}:tenants     ZSET tenants with ready work
--   KEYS[5]  orq:{q}:leases      ZSET score=lease deadline ms
--   KEYS[10] orq:{q}:tenant:     prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats       HASH counters
--   KEYS[12] orq:{q}:events      STREAM
--   KEYS[14] orq:{q}:config      HASH aging_step_ms
--   KEYS[15] orq:{q}:parked      ZSET tenants held back by a limit (a lease that ends unparks)
--
-- ARGV:
--   ARGV[1]  string   task id
--   ARGV[2]  string   lease token
--
-- Returns: {now_ms, 'released' | 'again'}
-- Errors: NOTFOUND; STALE; CANCELLED; INVALID (no id or token); CORRUPT (a key it writes holds
--   foreign data, or the task has no tenant; nothing written).
-- Emits: released.
--
-- Uses: ctx, format, args, keys, events, task, ready, outcome

local c = new_ctx(KEYS)

local now = now_ms()
local id, token = ARGV[1], ARGV[2]
local missing = require_args(ARGV, {'id', 'token'})
if missing then return missing end
local bad = check_keys(c, {3, 5, 11, 12, 14, 15})
if bad then return bad end
local state = check_lease(c, id, token, 'released', true)
if state == 'again' then
  return {now, 'again'}
elseif state ~= 'ok' then
  return state
end
local t = fields(c, id, {'tenant', 'priority', 'attempt', 'worker'})
bad = tenant_error(c, t.tenant, priority_of(t.priority))
if bad then return bad end
local attempt = num(t.attempt, 1) - 1
if attempt < 0 then attempt = 0 end
redis.call('ZREM', c.K_LEASES, id)
redis.call('HSET', task_key(c, id), F.attempt, istr(attempt), F.outcome, 'released', F.lease_exp, '',
  F.worker, '')
to_ready(c, id, t.tenant, priority_of(t.priority), 'leased', now)
emit(c, now, 'released', id, t.tenant, attempt, 'w', t.worker or '')
return {now, 'released'}
