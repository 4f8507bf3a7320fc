-- queues: the registry of queue names (the one key outside every queue's slot).
--
-- Transition: none. A script with a single key, so it is cluster-safe and the simulator covers it.
-- Unlike the transition scripts it does not take the queue key set.
--
-- KEYS:
--   KEYS[1]  orq:queues  SET of queue names
--
-- ARGV:
--   ARGV[1]  string  'add', 'list' or 'probe'
--   ARGV[2]  string  queue name to add (mode add; validated by the caller)
--
-- Returns: mode add: {now_ms, 1 when the name was new else 0};
--   mode list: {now_ms, {name, ...}} sorted by name;
--   mode probe: {now_ms, 1}: the store accepts writes (readiness). It adds and removes the empty
--   name (never a queue name), so it changes nothing, but Redis refuses its SADD as it would any
--   write that may grow memory: OOM at maxmemory, READONLY on a replica, LOADING.
-- Errors: INVALID; CORRUPT (orq:queues holds another Redis type than a SET); in mode probe,
--   Redis's own refusals (OOM, READONLY, ...).
-- Emits: nothing. Publishes: the queue's name on `<KEYS[1]>:wake` (orq:queues:wake) when mode add
--   recorded a new name (design note 27).

local now = now_ms()
if #KEYS ~= 1 then return redis.error_reply('INVALID expected 1 key, got ' .. #KEYS) end
local bad = type_error(KEYS[1], 'set')
if bad then return bad end
if ARGV[1] == 'add' then
  if not ARGV[2] or ARGV[2] == '' then return redis.error_reply('INVALID queue name is required') end
  local added = redis.call('SADD', KEYS[1], ARGV[2])
  if added == 1 then
    -- A new queue: workers that serve every queue hear it on <KEYS[1]>:wake (design note 27).
    redis.call('PUBLISH', KEYS[1] .. ':wake', ARGV[2])
  end
  return {now, added}
elseif ARGV[1] == 'probe' then
  redis.call('SADD', KEYS[1], '')
  redis.call('SREM', KEYS[1], '')
  return {now, 1}
elseif ARGV[1] == 'list' then
  local names = redis.call('SMEMBERS', KEYS[1])
  table.sort(names)
  return {now, names}
end
return redis.error_reply('INVALID mode must be add, list or probe')
