-- replay: put dead tasks back in the queue with a fresh retry budget.
--
-- Transition: dead -> queued. attempt restarts at 0 (so max_retries applies again), `replays`
-- counts the replays, run_at becomes the replay time, and the attempt history and last_error are
-- kept.
-- Two modes: by ids, or by filter over the DLQ (oldest first, bounded scan).
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:       prefix of HASH orq:{q}:task:<id>
--   KEYS[2]  orq:{q}:ready:      prefix of LIST orq:{q}:ready:<priority>:<tenant>
--   KEYS[3]  orq:{q}:tenants     ZSET tenants with ready work
--   KEYS[6]  orq:{q}:dead        ZSET score=time of death ms
--   KEYS[10] orq:{q}:tenant:     prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats       HASH counters
--   KEYS[12] orq:{q}:events      STREAM
--   KEYS[14] orq:{q}:config      HASH aging_step_ms
--
-- ARGV, mode ids:
--   ARGV[1]  'ids'
--   ARGV[2..] string  task ids (1..1000)
-- ARGV, mode filter:
--   ARGV[1]  'filter'
--   ARGV[2]  string   tenant, or '' for any
--   ARGV[3]  string   type, or '' for any
--   ARGV[4]  integer  most tasks to replay (1..10000)
--   ARGV[5]  integer  most DLQ entries to examine (1..100000)
--
-- Returns, mode ids: {now_ms, {result, ...}} with one result per id: 'replayed', 'notfound',
--   'corrupt' (see Errors) or the task's status when it is not dead.
-- Returns, mode filter: {now_ms, replayed_count, more} where more is 1 when the scan stopped at a
--   bound with DLQ entries left unexamined.
-- Errors: INVALID; CORRUPT (a queue key it writes holds foreign data; nothing written; a dead
--   task that cannot be replayed because its hash is not a hash, it has no tenant or its
--   tenant's keys hold foreign data answers 'corrupt' in mode ids, and is skipped in mode
--   filter).
-- Emits: replayed, one per task.
--
-- Uses: ctx, format, args, keys, counters, events, task, ready

local c = new_ctx(KEYS)

local now = now_ms()

local REPLAY_FIELDS = {'status', 'tenant', 'priority', 'type'}

local function replay_one(id)
  local t = fields(c, id, REPLAY_FIELDS)
  if not t then
    return 'corrupt'
  end
  if not t.status then
    redis.call('ZREM', c.K_DEAD, id)
    return 'notfound'
  end
  if t.status ~= 'dead' then
    return t.status
  end
  if tenant_error(c, t.tenant, priority_of(t.priority)) then
    return 'corrupt'
  end
  redis.call('ZREM', c.K_DEAD, id)
  hincr(c, task_key(c, id), F.replays, 1)
  -- Due again now: run_at says when the task became due (Task::run_at_ms).
  redis.call('HSET', task_key(c, id), F.attempt, '0', F.finished_at, '', F.outcome, 'replayed',
    F.run_at, istr(now))
  to_ready(c, id, t.tenant, priority_of(t.priority), 'dead', now)
  hincr(c, c.K_STATS, 'total:replayed', 1)
  emit(c, now, 'replayed', id, t.tenant, 0)
  return 'replayed'
end

local bad = check_keys(c, {3, 6, 11, 12, 14, 15})
if bad then return bad end

if ARGV[1] == 'ids' then
  if #ARGV < 2 or #ARGV > 1001 then
    return redis.error_reply('INVALID between 1 and 1000 ids')
  end
  local out = {}
  for i = 2, #ARGV do
    out[#out + 1] = replay_one(ARGV[i])
  end
  return {now, out}
elseif ARGV[1] == 'filter' then
  local tenant, ttype = ARGV[2], ARGV[3]
  local limit, e = arg_int(ARGV[4], 'limit', 1, 10000)
  if not limit then return redis.error_reply(e) end
  local scan
  scan, e = arg_int(ARGV[5], 'scan', 1, 100000)
  if not scan then return redis.error_reply(e) end
  local ids = redis.call('ZRANGE', c.K_DEAD, 0, scan - 1)
  local filter_fields = {'tenant', 'type'}
  local n = 0
  local examined = 0
  for i = 1, #ids do
    if n >= limit then break end
    examined = i
    local id = ids[i]
    local t = fields(c, id, filter_fields) or {}
    if (tenant == '' or t.tenant == tenant) and (ttype == '' or t.type == ttype) then
      if replay_one(id) == 'replayed' then n = n + 1 end
    end
  end
  -- Entries left unexamined: the rest of this window, or any beyond it (replayed ones are gone).
  local more = 0
  if examined < #ids or redis.call('ZCARD', c.K_DEAD) + n - #ids > 0 then more = 1 end
  return {now, n, more}
end
return redis.error_reply('INVALID mode must be ids or filter')
