-- promote: move due scheduled and retrying tasks to their tenants' ready sets.
--
-- Transition: scheduled -> queued, retrying -> queued (run_at <= now by the store's clock),
-- at most `bound` per call; callers repeat while the reply says more are due.
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:       prefix of HASH orq:{q}:task:<id>
--   KEYS[2]  orq:{q}:ready:      prefix of LIST orq:{q}:ready:<priority>:<tenant>
--   KEYS[3]  orq:{q}:tenants     ZSET tenants with ready work
--   KEYS[4]  orq:{q}:scheduled   ZSET score=run_at ms
--   KEYS[10] orq:{q}:tenant:     prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats       HASH counters
--   KEYS[12] orq:{q}:events      STREAM
--   KEYS[14] orq:{q}:config      HASH aging_step_ms
--   KEYS[15] orq:{q}:parked      ZSET tenants held back by a limit (a parked tenant stays parked)
--
-- ARGV:
--   ARGV[1]  integer  bound: most tasks moved in this call (1..1000)
--
-- Returns: {now_ms, promoted_count, next_run_at_ms (-1 when nothing is scheduled)}
-- Errors: INVALID; CORRUPT <key> (a queue key of another Redis type; nothing written). Due
--   entries that cannot be promoted (lib/keys.lua: corrupt or foreign state) are dropped and counted
--   in stats `total:repaired`.
-- Emits: queued (from = scheduled | retrying), one per promoted task.
--
-- Uses: ctx, format, args, keys, events, maintenance

local c = new_ctx(KEYS)

local now = now_ms()
local bound, e = arg_int(ARGV[1], 'bound', 1, 1000)
if not bound then return redis.error_reply(e) end
-- The scheduled set's first entry, read first (the read checks its type): when nothing is due
-- the call writes nothing, so it checks no other key (lib/keys.lua: a call checks the keys it
-- writes) and makes 2 calls into Redis (9 before).
local bad = check_keys(c, {})
if bad then return bad end
local first
first, bad = read_first(c.K_SCHEDULED)
if not first then return bad end
if first < 0 or first > now then return {now, 0, first} end
bad = check_keys(c, {3, 11, 12, 14, 15})
if bad then return bad end
defer_events(c)
local n = promote_due(c, now, bound)
flush_events(c)
return {now, n, first_score(c.K_SCHEDULED)}
