-- cancel: stop a task that has not finished.
--
-- Transition: queued / scheduled / retrying / leased -> cancelled. A leased task's lease ends at
-- once; its worker learns it at the next heartbeat (CANCELLED) and aborts the handler, and its
-- late complete or fail is refused with CANCELLED. Cancelling a cancelled task answers 'again'.
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:       prefix of HASH orq:{q}:task:<id>
--   KEYS[2]  orq:{q}:ready:      prefix of LIST orq:{q}:ready:<priority>:<tenant>
--   KEYS[3]  orq:{q}:tenants     ZSET tenants with ready work
--   KEYS[4]  orq:{q}:scheduled   ZSET score=run_at ms
--   KEYS[5]  orq:{q}:leases      ZSET score=lease deadline ms
--   KEYS[8]  orq:{q}:cancelled   ZSET score=cancel time ms
--   KEYS[10] orq:{q}:tenant:     prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats       HASH counters
--   KEYS[12] orq:{q}:events      STREAM
--
-- ARGV:
--   ARGV[1]  string   task id
--
-- Returns: {now_ms, 'cancelled' | 'again', fields} (fields: the task after the change, as lib/task.lua's
--   `task_view` gives it)
-- Errors: NOTFOUND; CONFLICT <status> (the task is completed or dead, or its status is not one
--   orq knows); INVALID (no id); CORRUPT (a key it writes holds foreign data, or the task has no
--   tenant; nothing written).
-- Emits: cancelled.
--
-- Uses: ctx, format, args, keys, counters, events, status, task, ready

local c = new_ctx(KEYS)

local now = now_ms()
local id = ARGV[1]
local missing = require_args(ARGV, {'id'})
if missing then return missing end
local bad = check_keys(c, {3, 4, 5, 8, 11, 12, 15})
if bad then return bad end
local t
t, bad = fields(c, id, {'status', 'tenant', 'attempt', 'worker', 'priority'})
if bad then return bad end
if not t.status then
  return redis.error_reply('NOTFOUND task ' .. id)
end
if t.status == 'cancelled' then
  return {now, 'again', task_view(c, id)}
end
local CANCELLABLE = {queued = true, scheduled = true, retrying = true, leased = true}
if not CANCELLABLE[t.status] then
  return redis.error_reply('CONFLICT task is ' .. t.status)
end
local p = priority_of(t.priority)
bad = tenant_error(c, t.tenant, t.status == 'queued' and p or nil)
if bad then return bad end
if t.status == 'queued' then
  from_ready(c, id, t.tenant, p)
elseif t.status == 'scheduled' or t.status == 'retrying' then
  redis.call('ZREM', c.K_SCHEDULED, id)
elseif t.status == 'leased' then
  redis.call('ZREM', c.K_LEASES, id)
  redis.call('HSET', task_key(c, id), F.outcome, 'cancelled', F.lease_exp, '')
else
  return redis.error_reply('CONFLICT task is ' .. t.status)
end
redis.call('ZADD', c.K_CANCELLED, istr(now), id)
redis.call('HSET', task_key(c, id), F.finished_at, istr(now), F.updated_at, istr(now))
set_status(c, id, t.tenant, t.status, 'cancelled')
hincr(c, c.K_STATS, 'total:cancelled', 1)
emit(c, now, 'cancelled', id, t.tenant, num(t.attempt, 0), 'from', t.status)
return {now, 'cancelled', task_view(c, id)}
