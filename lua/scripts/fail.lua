-- fail: record a failed attempt.
--
-- Transition: leased -> retrying (retries left and the error is retryable; run_at = now + backoff
-- with jitter) or leased -> dead (the DLQ). Idempotent under a retried call with the same token.
--
-- KEYS: the queue key set (lib.lua); this script uses
--   KEYS[1]  orq:{q}:task:       prefix of HASH orq:{q}:task:<id>
--   KEYS[4]  orq:{q}:scheduled   ZSET score=run_at ms
--   KEYS[5]  orq:{q}:leases      ZSET score=lease deadline ms
--   KEYS[6]  orq:{q}:dead        ZSET score=time of death ms
--   KEYS[10] orq:{q}:tenant:     prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats       HASH counters
--   KEYS[12] orq:{q}:events      STREAM
--
-- ARGV:
--   ARGV[1]  string   task id
--   ARGV[2]  string   lease token
--   ARGV[3]  string   error message (truncated to ERROR_MAX bytes)
--   ARGV[4]  integer  1 = retryable, 0 = permanent (straight to the DLQ)
--   ARGV[5]  number   jitter draw in [0, 1) from the caller
--
-- Returns: {now_ms, 'retrying' | 'dead' | 'again', run_at_ms (-1 when dead or again)}
-- Errors: NOTFOUND; STALE; CANCELLED; INVALID.
-- Emits: retrying or dead.

local now = now_ms()
local id, token, err = ARGV[1], ARGV[2], ARGV[3]
local missing = require_args({'id', 'token'})
if missing then return missing end
local retryable, e = arg_int(ARGV[4], 'retryable', 0, 1)
if not retryable then return redis.error_reply(e) end
local r
r, e = arg_num(ARGV[5], 'jitter draw', 0, 1)
if not r then return redis.error_reply(e) end
local state = check_lease(id, token, 'failed')
if state == 'again' then
  return {now, 'again', -1}
elseif state ~= 'ok' then
  return state
end
local t = fields(id, FAIL_FIELDS)
redis.call('ZREM', K_LEASES, id)
local status = fail_attempt(id, t, now, err, retryable == 1, r, 'failed')
local run_at = -1
if status == 'retrying' then
  run_at = tonumber(redis.call('HGET', task_key(id), 'run_at'))
end
return {now, status, run_at}
