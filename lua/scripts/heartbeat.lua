-- heartbeat: extend a live lease.
--
-- Transition: leased -> leased (the deadline moves to now + extend_ms; hb_at records the call).
-- Not a status change, so no event is emitted (heartbeats would flood the stream).
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:   prefix of HASH orq:{q}:task:<id>
--   KEYS[5]  orq:{q}:leases  ZSET score=lease deadline ms
--   KEYS[16] orq:{q}:workers ZSET workers seen, score=last call ms (the lease holder is noted)
--
-- ARGV:
--   ARGV[1]  string   task id
--   ARGV[2]  string   lease token received from lease
--   ARGV[3]  integer  extension in ms from the store's now (0 = the task's lease_ms)
--
-- Returns: {now_ms, expires_at_ms}
-- Errors: NOTFOUND; STALE (token not current, or the lease already ended); CANCELLED (the task was
--   cancelled while leased: the worker should abort the handler); INVALID; CORRUPT (a key it
--   writes holds foreign data; nothing written).
-- Emits: nothing.
--
-- Uses: ctx, format, args, keys, task, workers, outcome

local c = new_ctx(KEYS)

local now = now_ms()
local id, token = ARGV[1], ARGV[2]
local missing = require_args(ARGV, {'id', 'token'})
if missing then return missing end
local ext, e = arg_int(ARGV[3], 'extend_ms', 0, FACTS.lease_ms_max)
if not ext then return redis.error_reply(e) end
local bad = check_keys(c, {5})
if bad then return bad end
-- The workers silent long enough to be forgotten, read before the first write (the read checks
-- the set's type instead of a TYPE).
local old = silent_workers(c, now)
if old.err then return type_error(c.K_WORKERS, 'zset') or redis.error_reply(old.err) end
-- The lease check reads the fields the heartbeat needs too (the worker, the task's lease_ms).
local state, t = check_lease(c, id, token, 'heartbeat', false, {'status', 'token', 'worker', 'lease_ms'})
if state ~= 'ok' then
  if state == 'again' then
    return redis.error_reply('STALE lease ended')
  end
  return state
end
if ext == 0 then
  ext = num(t.lease_ms, LEASE_MS_DEFAULT)
  if ext < FACTS.lease_ms_min or ext > FACTS.lease_ms_max then ext = LEASE_MS_DEFAULT end
  ext = math.floor(ext)
end
local exp = now + ext
redis.call('ZADD', c.K_LEASES, istr(exp), id)
redis.call('HSET', task_key(c, id), F.lease_exp, istr(exp), F.hb_at, istr(now))
if t.worker and t.worker ~= '' then note_worker(c, t.worker, now, old) end
return {now, exp}
