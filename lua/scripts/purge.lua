-- purge: delete dead tasks for good.
--
-- Transition: dead -> (deleted): the task hash and its DLQ entry go together.
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:       prefix of HASH orq:{q}:task:<id>
--   KEYS[6]  orq:{q}:dead        ZSET score=time of death ms
--   KEYS[10] orq:{q}:tenant:     prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats       HASH counters
--   KEYS[12] orq:{q}:events      STREAM
--
-- ARGV:
--   ARGV[1..] string  task ids (1..1000)
--
-- Returns: {now_ms, {result, ...}} with one result per id: 'purged', 'notfound', 'corrupt', or
--   the task's status when it is not dead (nothing is deleted then).
-- Errors: INVALID; CORRUPT (a queue key it writes holds foreign data; nothing written). A dead
--   task whose hash is not a hash answers 'corrupt' and is left as it is; one without a tenant
--   is purged (only the queue's counter is decremented).
-- Emits: purged, one per task.
--
-- Uses: ctx, format, keys, counters, events, task

local c = new_ctx(KEYS)

local now = now_ms()
if #ARGV < 1 or #ARGV > 1000 then
  return redis.error_reply('INVALID between 1 and 1000 ids')
end
local bad = check_keys(c, {6, 11, 12})
if bad then return bad end
local out = {}
local names = {'status', 'tenant', 'attempt'}
for i = 1, #ARGV do
  local id = ARGV[i]
  local t = fields(c, id, names)
  if not t then
    out[i] = 'corrupt'
  elseif not t.status then
    redis.call('ZREM', c.K_DEAD, id)
    out[i] = 'notfound'
  elseif t.status ~= 'dead' then
    out[i] = t.status
  else
    redis.call('ZREM', c.K_DEAD, id)
    redis.call('DEL', task_key(c, id))
    hincr(c, c.K_STATS, 'n:dead', -1)
    if t.tenant and t.tenant ~= '' and not type_error(tenant_key(c, t.tenant), 'hash') then
      hincr(c, tenant_key(c, t.tenant), 'n:dead', -1)
    end
    hincr(c, c.K_STATS, 'total:purged', 1)
    emit(c, now, 'purged', id, t.tenant or '', num(t.attempt, 0))
    out[i] = 'purged'
  end
end
return {now, out}
