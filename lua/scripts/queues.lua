-- queues: the registry of queue names, who created each, and the data-format version (the keys
-- outside every queue's slot; all in the registry's slot, so a call may declare them together on
-- Redis Cluster).
--
-- Transition: none. A script of its own keys, so it is cluster-safe and the simulator covers it.
-- Unlike the transition scripts it does not take the queue key set.
--
-- KEYS:
--   KEYS[1]  orq:queues               SET of queue names
--   KEYS[2]  mode format: orq:format:{orq:queues}  STRING the data-format version
--            modes create and remove: orq:creators:{orq:queues}  HASH q:<queue> = the tenant
--            whose key created it, t:<tenant> = how many queues that tenant created that exist
--
-- ARGV:
--   ARGV[1]  string  'add', 'create', 'remove', 'list', 'probe' or 'format'
--   ARGV[2]  string  modes add and remove: the queue name (validated by the caller);
--                    mode create: the tenant creating the queues (validated by the caller)
--   ARGV[3]  integer mode create: the most queues that tenant may have created (1..)
--   ARGV[4..] string mode create: the queue names (1..1000, validated and distinct)
--
-- Returns: mode add: {now_ms, 1 when the name was new else 0};
--   mode create: {now_ms, created, count}: created is the number of names that were new, all
--   now registered and counted against the tenant, or -1 when they would take the tenant past
--   ARGV[3] queues (none is created then: all or nothing); count is the queues the tenant has
--   created that exist (after this call);
--   mode remove: {now_ms, 1 when the name was there else 0, creator} with creator the tenant
--   that created it ('' when an admin or a worker serving it did);
--   mode list: {now_ms, {name, ...}} sorted by name;
--   mode probe: {now_ms, 1}: the store accepts writes (readiness). It adds and removes the empty
--   name (never a queue name), so it changes nothing, but Redis refuses its SADD as it would any
--   write that may grow memory: OOM at maxmemory, READONLY on a replica, LOADING.
--   mode format: {now_ms, stored}: the data-format version KEYS[2] holds, as stored (the caller
--   compares it with its own, FACTS.data_format: design note 39); when the key is absent it is
--   first set to FACTS.data_format, so a fresh Redis gets this orq's format (only then does it
--   write: a replica or a full Redis answers a stored version).
-- Errors: INVALID; CORRUPT (orq:queues holds another Redis type than a SET; in mode format, KEYS[2]
--   another type than a STRING; in modes create and remove, another type than a HASH); Redis's
--   own refusals of a write (OOM, READONLY, ...) in modes probe, format, create and remove.
-- Emits: nothing. Publishes: the queue's name on `<KEYS[1]>:wake` (orq:queues:wake) when mode add
--   or create recorded a new name (design note 27).
--
-- Uses: format, keys

local now = now_ms()
local mode = ARGV[1]
local two_keys = mode == 'format' or mode == 'create' or mode == 'remove'
local want_keys = two_keys and 2 or 1
if #KEYS ~= want_keys then
  return redis.error_reply('INVALID expected ' .. want_keys .. ' keys, got ' .. #KEYS)
end
local bad = type_error(KEYS[1], 'set')
if bad then return bad end
if mode == 'format' then
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
if mode == 'create' or mode == 'remove' then
  bad = type_error(KEYS[2], 'hash')
  if bad then return bad end
  if mode == 'remove' then
    local queue = ARGV[2]
    if not queue or queue == '' then return redis.error_reply('INVALID queue name is required') end
    local removed = redis.call('SREM', KEYS[1], queue)
    local creator = redis.call('HGET', KEYS[2], 'q:' .. queue)
    if creator then
      redis.call('HDEL', KEYS[2], 'q:' .. queue)
      if redis.call('HINCRBY', KEYS[2], 't:' .. creator, -1) <= 0 then
        redis.call('HDEL', KEYS[2], 't:' .. creator)
      end
    end
    return {now, removed, creator or ''}
  end
  local tenant = ARGV[2]
  if not tenant or tenant == '' then return redis.error_reply('INVALID tenant is required') end
  local cap = tonumber(ARGV[3])
  if not cap or cap < 1 or cap ~= math.floor(cap) then
    return redis.error_reply('INVALID the most queues a tenant may create must be an integer >= 1')
  end
  if #ARGV < 4 or #ARGV > 1003 then
    return redis.error_reply('INVALID between 1 and 1000 queue names')
  end
  local count = tonumber(redis.call('HGET', KEYS[2], 't:' .. tenant) or '0') or 0
  local new = {}
  for i = 4, #ARGV do
    if ARGV[i] == '' then return redis.error_reply('INVALID queue name is required') end
    if redis.call('SISMEMBER', KEYS[1], ARGV[i]) == 0 then new[#new + 1] = ARGV[i] end
  end
  if #new == 0 then return {now, 0, count} end
  if count + #new > cap then return {now, -1, count} end
  for i = 1, #new do
    redis.call('SADD', KEYS[1], new[i])
    redis.call('HSET', KEYS[2], 'q:' .. new[i], tenant)
    redis.call('PUBLISH', KEYS[1] .. ':wake', new[i])
  end
  count = redis.call('HINCRBY', KEYS[2], 't:' .. tenant, #new)
  return {now, #new, count}
end
if mode == 'add' then
  if not ARGV[2] or ARGV[2] == '' then return redis.error_reply('INVALID queue name is required') end
  local added = redis.call('SADD', KEYS[1], ARGV[2])
  if added == 1 then
    -- A new queue: workers that serve every queue hear it on <KEYS[1]>:wake (design note 27).
    redis.call('PUBLISH', KEYS[1] .. ':wake', ARGV[2])
  end
  return {now, added}
elseif mode == 'probe' then
  redis.call('SADD', KEYS[1], '')
  redis.call('SREM', KEYS[1], '')
  return {now, 1}
elseif mode == 'list' then
  local names = redis.call('SMEMBERS', KEYS[1])
  table.sort(names)
  return {now, names}
end
return redis.error_reply('INVALID mode must be add, create, remove, list, probe or format')
