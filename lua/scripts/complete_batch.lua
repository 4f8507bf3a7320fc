-- complete_batch: record the success of up to 100 leased tasks in one call (a worker's group
-- commit: the completions that finished while its previous call was in flight), and optionally
-- lease the next tasks for the slots they freed in the same call (`lease` after the completions,
-- one round trip instead of two).
--
-- Transition: leased -> completed, per item, exactly as `complete` (the same lib function); each
-- item succeeds or fails on its own. Idempotent per item: a retried item with the same token
-- answers 'again' and changes nothing. Status counters are added once per call, the event stream
-- is trimmed once per call, and finished tasks past retention are trimmed once (bounded).
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:       prefix of HASH orq:{q}:task:<id>
--   KEYS[3]  orq:{q}:tenants     ZSET tenants with ready work (a tenant unparked re-enters)
--   KEYS[5]  orq:{q}:leases      ZSET score=lease deadline ms
--   KEYS[7]  orq:{q}:completed   ZSET score=finish time ms
--   KEYS[8]  orq:{q}:cancelled   ZSET score=cancel time ms (retention trim)
--   KEYS[10] orq:{q}:tenant:     prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats       HASH counters, events (read before any write)
--   KEYS[12] orq:{q}:events      STREAM
--   KEYS[15] orq:{q}:parked      ZSET tenants held back by a limit (a lease that ends unparks)
--   and, when it also leases, every key `lease` uses (KEYS[2], [4], [6], [14], [16] besides).
--
-- ARGV:
--   ARGV[1]  integer  retention of finished tasks, ms
--   ARGV[2]  integer  trim bound: most finished tasks deleted per index per call (0..1000)
--   ARGV[3]  integer  n, number of items (1..100)
--   then n groups of 3 values, one per item:
--     id       string  task id
--     token    string  lease token
--     result   bytes   result (JSON), may be ''
--   then, optionally, 6 more: the `lease` script's ARGV[1..6] (worker id, n, token bits, jitter
--     seed, promote bound, reap bound; checked as `lease` checks them, before anything is written):
--     after the completions the call leases as one `lease` call made right after it would.
--
-- Returns: {now_ms, {outcome, ...}} with one outcome per item, in order: 'completed', 'again', or
--   the text of the error `complete` would answer for it alone (NOTFOUND ..., STALE ...,
--   CANCELLED ..., CORRUPT ...; that item wrote nothing). When it also leases:
--   {now_ms, {outcome, ...}, {expires_at_ms, fields, epoch, attempt, payload, ...}, next_ms}, the last two as `lease` answers them.
-- Errors: INVALID <message> (nothing written); CORRUPT <key> (a queue key of another Redis type;
--   nothing written).
-- Emits: completed (w worker, run_ms), one per completed item; when it also leases, what `lease`
--   emits.
--
-- Uses: ctx, format, args, keys, counters, events, maintenance, outcome, lease

local c = new_ctx(KEYS)

local BATCH_MAX = 100
local GROUP = 3

local now = now_ms()
local retention, e = arg_int(ARGV[1], 'retention_ms', 0, 31622400000)
if not retention then return redis.error_reply(e) end
local trim
trim, e = arg_int(ARGV[2], 'trim bound', 0, 1000)
if not trim then return redis.error_reply(e) end
local n
n, e = arg_int(ARGV[3], 'count', 1, BATCH_MAX)
if not n then return redis.error_reply(e) end
local lease_a = nil
if #ARGV == 3 + n * GROUP + 6 then
  lease_a, e = lease_args(ARGV, 3 + n * GROUP)
  if not lease_a then return e end
elseif #ARGV ~= 3 + n * GROUP then
  return redis.error_reply('INVALID expected ' .. istr(3 + n * GROUP) .. ' arguments, or '
    .. istr(3 + n * GROUP + 6) .. ' with a lease')
end
for i = 1, n do
  local b = 3 + (i - 1) * GROUP
  if ARGV[b + 1] == '' or ARGV[b + 2] == '' then
    return redis.error_reply('INVALID item ' .. istr(i) .. ': id and token are required')
  end
end
-- Its own keys, and with a lease the lease's (LEASE_KEYS, lib/lease.lua), each checked once.
local bad = check_keys(c, lease_a and {3, 4, 5, 6, 7, 8, 12, 15, 16} or {3, 5, 7, 8, 12, 15})
if bad then return bad end
-- The stats hash, checked by reading what the call needs of it: the last event's id (lib/events.lua).
local ev = redis.pcall('HGET', c.K_STATS, 'events')
if type(ev) == 'table' then
  return type_error(c.K_STATS, 'hash') or redis.error_reply(ev.err)
end
events_read(c, ev)
local lease_r = nil
if lease_a then
  lease_r, bad = lease_reads(c)
  if not lease_r then return bad end
end

defer_events(c)
defer_counts(c)
local out = {}
local per_tenant = {ids = {}, tenants = {}, counts = {}}
for i = 1, n do
  local b = 3 + (i - 1) * GROUP
  local state = complete_task(c, ARGV[b + 1], ARGV[b + 2], ARGV[b + 3], now, per_tenant)
  if type(state) == 'table' then
    out[i] = state.err
  else
    out[i] = state
  end
end
local done = per_tenant.ids
if #done > 0 then
  redis.call('ZREM', c.K_LEASES, unpack(done))
  local scored = {}
  for i = 1, #done do
    scored[#scored + 1] = istr(now)
    scored[#scored + 1] = done[i]
  end
  redis.call('ZADD', c.K_COMPLETED, unpack(scored))
end
for i = 1, #per_tenant.tenants do
  local tenant = per_tenant.tenants[i]
  count_completed(c, tenant, now, per_tenant.counts[tenant])
end
flush_counts(c)
if trim > 0 then trim_finished(c, now, retention, trim) end
if lease_a then
  -- The lease's events join the completions' in the same entries (lease_tasks writes them).
  local tasks, next_ms = lease_tasks(c, lease_a, now, lease_r)
  return {now, out, tasks, next_ms}
end
flush_events(c)
return {now, out}
