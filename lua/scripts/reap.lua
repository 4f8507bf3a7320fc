-- reap: expire leases whose deadline has passed, and trim finished tasks past retention.
--
-- Transition: leased -> retrying / dead (an expired lease counts as a failed attempt, so a task
-- that kills every worker ends in the DLQ); completed / cancelled -> deleted after retention.
-- Bounded per call; callers repeat while the reply says more are expired.
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:       prefix of HASH orq:{q}:task:<id>
--   KEYS[3]  orq:{q}:tenants     ZSET tenants with ready work (a tenant unparked re-enters)
--   KEYS[4]  orq:{q}:scheduled   ZSET score=run_at ms
--   KEYS[5]  orq:{q}:leases      ZSET score=lease deadline ms
--   KEYS[6]  orq:{q}:dead        ZSET score=time of death ms
--   KEYS[7]  orq:{q}:completed   ZSET score=finish time ms
--   KEYS[8]  orq:{q}:cancelled   ZSET score=cancel time ms
--   KEYS[10] orq:{q}:tenant:     prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats       HASH counters
--   KEYS[12] orq:{q}:events      STREAM
--   KEYS[15] orq:{q}:parked      ZSET tenants held back by a limit (a lease that ends unparks)
--
-- ARGV:
--   ARGV[1]  integer  bound: most leases reaped in this call (1..1000)
--   ARGV[2]  number   jitter seed in [0, 1) for the retries' backoff
--   ARGV[3]  integer  retention of completed / cancelled tasks, ms
--   ARGV[4]  integer  trim bound: most finished tasks deleted per index (0..1000)
--
-- Returns: {now_ms, reaped_count, trimmed_count, next_deadline_ms (-1 when nothing is leased)}
-- Errors: INVALID; CORRUPT <key> (a queue key of another Redis type; nothing written). Expired or
--   trimmed entries that cannot be acted on (lib/keys.lua: corrupt or foreign state) are dropped and
--   counted in stats `total:repaired`.
-- Emits: retrying or dead, one per reaped lease.
--
-- Uses: ctx, format, args, keys, events, maintenance

local c = new_ctx(KEYS)

local now = now_ms()
local bound, e = arg_int(ARGV[1], 'bound', 1, 1000)
if not bound then return redis.error_reply(e) end
local seed
seed, e = arg_num(ARGV[2], 'seed', 0, 1)
if not seed then return redis.error_reply(e) end
local retention
retention, e = arg_int(ARGV[3], 'retention_ms', 0, 31622400000)
if not retention then return redis.error_reply(e) end
local trim
trim, e = arg_int(ARGV[4], 'trim bound', 0, 1000)
if not trim then return redis.error_reply(e) end
-- The leases set's first entry and the finished tasks past their retention, read first (the
-- reads check the keys' types): when no lease has expired and nothing is to be trimmed the call
-- writes nothing, so it checks no other key (lib/keys.lua: a call checks the keys it writes) and
-- makes 4 calls into Redis (14 before).
local bad = check_keys(c, {})
if bad then return bad end
local first
first, bad = read_first(c.K_LEASES)
if not first then return bad end
local olds = nil
if trim > 0 then
  local done, cancelled
  done, bad = read_old(c.K_COMPLETED, now, retention, trim)
  if not done then return bad end
  cancelled, bad = read_old(c.K_CANCELLED, now, retention, trim)
  if not cancelled then return bad end
  olds = {done, cancelled}
end
local expiring = first >= 0 and first < now
if not expiring and not (olds and (#olds[1] > 0 or #olds[2] > 0)) then
  return {now, 0, 0, first}
end
bad = check_keys(c, {3, 4, 6, 11, 12, 15})
if bad then return bad end
defer_events(c)
local reaped = 0
if expiring then reaped = reap_expired(c, now, bound, seed) end
local trimmed = 0
if olds then trimmed = trim_finished(c, now, retention, trim, olds) end
flush_events(c)
return {now, reaped, trimmed, first_score(c.K_LEASES)}
