-- fail: record a failed attempt.
--
-- Transition: leased -> retrying (retries left and the error is retryable; run_at = now + backoff
-- with jitter) or leased -> dead (the DLQ). Idempotent under a retried call with the same token.
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:       prefix of HASH orq:{q}:task:<id>
--   KEYS[3]  orq:{q}:tenants     ZSET tenants with ready work (a tenant unparked re-enters)
--   KEYS[4]  orq:{q}:scheduled   ZSET score=run_at ms
--   KEYS[5]  orq:{q}:leases      ZSET score=lease deadline ms
--   KEYS[6]  orq:{q}:dead        ZSET score=time of death ms
--   KEYS[10] orq:{q}:tenant:     prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats       HASH counters
--   KEYS[12] orq:{q}:events      STREAM
--   KEYS[15] orq:{q}:parked      ZSET tenants held back by a limit (a lease that ends unparks)
--
-- ARGV:
--   ARGV[1]  string   task id
--   ARGV[2]  string   lease token
--   ARGV[3]  string   error message (truncated to ERROR_MAX bytes)
--   ARGV[4]  integer  1 = retryable, 0 = permanent (straight to the DLQ)
--   ARGV[5]  number   jitter draw in [0, 1) from the caller
--
-- Returns: {now_ms, 'retrying' | 'dead' | 'again', run_at_ms (-1 when dead or again)}
-- Errors: NOTFOUND; STALE; CANCELLED; INVALID; CORRUPT (a key it writes holds foreign data, or
--   the task has no tenant; nothing written).
-- Emits: retrying or dead.
--
-- Uses: ctx, format, args, keys, task, retry, outcome

local c = new_ctx(KEYS)

local now = now_ms()
local id, token, err = ARGV[1], ARGV[2], ARGV[3]
local missing = require_args(ARGV, {'id', 'token'})
if missing then return missing end
local retryable, e = arg_int(ARGV[4], 'retryable', 0, 1)
if not retryable then return redis.error_reply(e) end
local r
r, e = arg_num(ARGV[5], 'jitter draw', 0, 1)
if not r then return redis.error_reply(e) end
local bad = check_keys(c, {3, 4, 5, 6, 11, 12, 15})
if bad then return bad end
local state = check_lease(c, id, token, 'failed', true)
if state == 'again' then
  return {now, 'again', -1}
elseif state ~= 'ok' then
  return state
end
local t = fields(c, id, FAIL_FIELDS)
redis.call('ZREM', c.K_LEASES, id)
local status = fail_attempt(c, id, t, now, err, retryable == 1, r, 'failed')
local run_at = -1
if status == 'retrying' then
  run_at = num(redis.call('HGET', task_key(c, id), F.run_at), -1)
end
return {now, status, run_at}
