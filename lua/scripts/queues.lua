-- queues: the registry of queue names and the data-format version (the two keys outside every
-- queue's slot; both in the registry's slot, so a call may declare both on Redis Cluster).
--
-- Transition: none. A script of its own keys, so it is cluster-safe and the simulator covers it.
-- Unlike the transition scripts it does not take the queue key set.
--
-- KEYS:
--   KEYS[1]  orq:queues               SET of queue names
--   KEYS[2]  orq:format:{orq:queues}  STRING the data-format version (mode format only)
--
-- ARGV:
--   ARGV[1]  string  'add', 'list', 'probe' or 'format'
--   ARGV[2]  string  queue name to add (mode add; validated by the caller)
--
-- Returns: mode add: {now_ms, 1 when the name was new else 0};
--   mode list: {now_ms, {name, ...}} sorted by name;
--   mode probe: {now_ms, 1}: the store accepts writes (readiness). It adds and removes the empty
--   name (never a queue name), so it changes nothing, but Redis refuses its SADD as it would any
--   write that may grow memory: OOM at maxmemory, READONLY on a replica, LOADING.
--   mode format: {now_ms, stored}: the data-format version KEYS[2] holds, as stored (the caller
--   compares it with its own, FACTS.data_format: design note 39); when the key is absent it is
--   first set to FACTS.data_format, so a fresh Redis gets this orq's format (only then does it
--   write: a replica or a full Redis answers a stored version).
-- Errors: INVALID; CORRUPT (orq:queues holds another Redis type than a SET; in mode format, KEYS[2]
--   another type than a STRING); Redis's own refusals of a write (OOM, READONLY, ...) in modes
--   probe and format.
-- Emits: nothing. Publishes: the queue's name on `<KEYS[1]>:wake` (orq:queues:wake) when mode add
--   recorded a new name (design note 27).
--
-- Uses: format, keys

local now = now_ms()
local want_keys = ARGV[1] == 'format' and 2 or 1
if #KEYS ~= want_keys then
  return redis.error_reply('INVALID expected ' .. want_keys .. ' keys, got ' .. #KEYS)
end
local bad = type_error(KEYS[1], 'set')
if bad then return bad end
if ARGV[1] == 'format' then
  bad = type_error(KEYS[2], 'string')
  if bad then return bad end
  -- GET first: a store that holds a version is not written to, so a replica or a full Redis
  -- still answers it (its refusal comes at a write).
  local stored = redis.call('GET', KEYS[2])
  if not stored then
    stored = istr(FACTS.data_format)
    redis.call('SET', KEYS[2], stored)
  end
  return {now, stored}
end
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
return redis.error_reply('INVALID mode must be add, list, probe or format')
