-- complete: record a task's success.
--
-- Transition: leased -> completed. Idempotent: a retried call with the same token (the first
-- reply was lost) answers 'again' and changes nothing.
-- Also trims completed and cancelled tasks past their retention (bounded), hash and index together.
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:       prefix of HASH orq:{q}:task:<id>
--   KEYS[3]  orq:{q}:tenants     ZSET tenants with ready work (a tenant unparked re-enters)
--   KEYS[5]  orq:{q}:leases      ZSET score=lease deadline ms
--   KEYS[7]  orq:{q}:completed   ZSET score=finish time ms
--   KEYS[8]  orq:{q}:cancelled   ZSET score=cancel time ms (retention trim)
--   KEYS[10] orq:{q}:tenant:     prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats       HASH counters
--   KEYS[12] orq:{q}:events      STREAM
--   KEYS[15] orq:{q}:parked      ZSET tenants held back by a limit (a lease that ends unparks)
--
-- ARGV:
--   ARGV[1]  string   task id
--   ARGV[2]  string   lease token
--   ARGV[3]  bytes    result (JSON), may be ''
--   ARGV[4]  integer  retention of finished tasks, ms
--   ARGV[5]  integer  trim bound: most finished tasks deleted per index per call (0..1000)
--
-- Returns: {now_ms, 'completed' | 'again'}
-- Errors: NOTFOUND; STALE; CANCELLED; INVALID; CORRUPT (a key it writes holds foreign data, or
--   the task has no tenant; nothing written).
-- Emits: completed (w worker, run_ms = time from lease to completion, ms).
--
-- Uses: ctx, format, args, keys, maintenance, outcome

local c = new_ctx(KEYS)

local now = now_ms()
local id, token, result = ARGV[1], ARGV[2], ARGV[3]
local missing = require_args(ARGV, {'id', 'token'})
if missing then return missing end
local retention, e = arg_int(ARGV[4], 'retention_ms', 0, 31622400000)
if not retention then return redis.error_reply(e) end
local trim
trim, e = arg_int(ARGV[5], 'trim bound', 0, 1000)
if not trim then return redis.error_reply(e) end
if result == nil then return redis.error_reply('INVALID result is required') end
local bad = check_keys(c, {3, 5, 7, 8, 11, 12, 15})
if bad then return bad end
local state = complete_task(c, id, token, result, now, nil)
if state == 'again' then
  return {now, 'again'}
elseif state ~= 'completed' then
  return state
end
if trim > 0 then trim_finished(c, now, retention, trim) end
return {now, 'completed'}
