-- lease: hand up to N ready tasks to a worker.
--
-- Transition: queued -> leased (and, first, scheduled/retrying -> queued for due tasks, and
-- leased -> retrying/dead for expired leases, each bounded).
-- Tenants are served by virtual time (start-time fair queuing with per-tenant weights, default 1):
-- the backlogged tenant with the smallest virtual time goes next and its time advances by
-- 1/weight; a tenant that becomes backlogged again, or was skipped while limited, starts at the
-- queue's current virtual time (no credit is stored up while idle or limited).
-- A tenant at its max_inflight (live leases) or out of rate-limit tokens (a token bucket of
-- rate_per_s refilled continuously, capped at burst) is skipped, not waited for: it moves to the
-- parked set until one of its leases ends or its next token is due, so limited tenants are never
-- scanned again while they wait and cannot hide eligible ones. A paused queue
-- leases nothing (due tasks are still promoted and expired leases reaped).
-- Within a tenant the most urgent priority goes first, FIFO within a priority (or, with the
-- queue's aging_step_ms, by enqueue time minus priority x step).
-- The lease token is "<epoch>-<random>": epoch grows by one with every lease of the task (the
-- fencing epoch given to handlers), the random part comes from the caller.
--
-- KEYS: the queue key set (lib.lua); this script uses
--   KEYS[1]  orq:{q}:task:      prefix of HASH orq:{q}:task:<id>
--   KEYS[2]  orq:{q}:ready:     prefix of ZSET orq:{q}:ready:<tenant>
--   KEYS[3]  orq:{q}:tenants    ZSET tenants with ready work, score=virtual time
--   KEYS[4]  orq:{q}:scheduled  ZSET score=run_at ms
--   KEYS[5]  orq:{q}:leases     ZSET score=lease deadline ms
--   KEYS[6]  orq:{q}:dead       ZSET score=time of death ms
--   KEYS[10] orq:{q}:tenant:    prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats      HASH counters, vtime
--   KEYS[12] orq:{q}:events     STREAM
--   KEYS[14] orq:{q}:config     HASH paused, aging_step_ms
--   KEYS[15] orq:{q}:parked     ZSET tenants held back by a limit, score=ms when eligible again
--   KEYS[16] orq:{q}:workers    ZSET workers seen, score=last call ms
--
-- ARGV:
--   ARGV[1]  string   worker id (recorded on the task and in events)
--   ARGV[2]  integer  n, most tasks to lease (1..100)
--   ARGV[3]  string   random token bits from the caller (hex, 1..32 chars)
--   ARGV[4]  number   jitter seed in [0, 1) for retries of reaped leases
--   ARGV[5]  integer  promote bound: most due scheduled tasks moved per call (0..1000)
--   ARGV[6]  integer  reap bound: most expired leases reaped per call (0..1000)
--
-- Returns: {now_ms, {task, ...}, next_ms} where each task is {expires_at_ms, fields, epoch, attempt}:
--   fields is the task's compact hash as it was before this lease (flat, as HGETALL gives it),
--   then id; the lease wrote epoch, attempt, token = "<epoch>-<ARGV[3]>", worker = ARGV[1],
--   lease_exp = expires_at_ms, updated_at = now_ms (the lease's start while it is held) and
--   status = leased, which the caller applies (`orq::ops::lease`): replying with them, patched
--   into the record, cost Redis ~27,000 instructions per task. It writes no outcome (that of
--   the task's last lease, if any, stays until this lease ends) and no leased_at.
--   next_ms says when to ask again: now_ms when the call filled its n and ready work is left;
--   else the earliest of the next scheduled run_at and the time a rate-limited tenant has a
--   token again; -1 when unknown (nothing waits, the queue is paused, or only in-flight caps
--   hold work back).
-- Errors: INVALID <message>; CORRUPT <key> (a queue key of another Redis type; nothing written).
--   Entries met in the scheduled set, the leases set, a ready set or the tenants set that cannot
--   be acted on (lib.lua: corrupt or foreign state) are dropped and counted in stats `total:repaired`.
-- Emits: queued (promoted; from = scheduled | retrying), retrying / dead (reaped), leased (w worker,
--   epoch, wait_ms = time the task waited in its ready set, ms). Records the worker as seen
--   (KEYS[16]).

local LEASE_MAX = 100
-- Most limited tenants parked, and most parked tenants unparked, per call.
local TENANT_SCAN_MAX = 64

local now = now_ms()
local worker = ARGV[1]
local n, e = arg_int(ARGV[2], 'n', 1, LEASE_MAX)
if not n then return redis.error_reply(e) end
local bits = ARGV[3] or ''
if not string.match(bits, '^[0-9a-f]+$') or string.len(bits) > 32 then
  return redis.error_reply('INVALID token bits must be 1..32 lowercase hex digits')
end
local seed
seed, e = arg_num(ARGV[4], 'seed', 0, 1)
if not seed then return redis.error_reply(e) end
local promote_bound
promote_bound, e = arg_int(ARGV[5], 'promote bound', 0, 1000)
if not promote_bound then return redis.error_reply(e) end
local reap_bound
reap_bound, e = arg_int(ARGV[6], 'reap bound', 0, 1000)
if not reap_bound then return redis.error_reply(e) end
if not worker or worker == '' then return redis.error_reply('INVALID worker id is required') end
local bad = check_keys({3, 4, 5, 6, 11, 12, 14, 15, 16})
if bad then return bad end

if promote_bound > 0 then promote_due(now, promote_bound) end
note_worker(worker, now)
if reap_bound > 0 then reap_expired(now, reap_bound, seed) end

local out = {}
local paused = redis.call('HGET', K_CONFIG, 'paused') == '1'
unpark_due(now, TENANT_SCAN_MAX)
-- Status counters and `served` are added once at the end (lib.lua); the tenant's live leases
-- are read from its hash plus the leases this call made (tenant -> count).
defer_events()
defer_counts()
local leased_now = {}
local lease_scores = {}
local now_s = istr(now)
-- Tenants whose keys this call has checked (tenant -> true).
local tenant_ok = {}
local TENANT_FIELDS = {'weight', 'max_inflight', 'rate_per_s', 'burst', 'tokens', 'tokens_at', 'n:leased'}
-- Each pass leases tasks of one tenant, drops a tenant with no ready work, parks a limited
-- tenant, or stops; so the passes are bounded. A pass gives the head tenant as many tasks in a
-- row as start-time fair queuing would (its virtual time stays ahead of the next tenant's), its
-- limits allow and the call still wants, with one ZPOPMIN.
for _ = 1, 2 * n + TENANT_SCAN_MAX do
  if paused or #out >= n then break end
  local head = redis.call('ZRANGE', K_TENANTS, 0, 1, 'WITHSCORES')
  if #head == 0 then break end
  local tenant, vt = head[1], num(head[2], 0)
  -- A tenant whose own keys hold foreign data cannot be served: it leaves the fair-share set
  -- (counted as repaired) so that the other tenants are.
  if tenant_ok[tenant] == nil then
    tenant_ok[tenant] = tenant_error(tenant) == nil
  end
  local terr = not tenant_ok[tenant]
  local th = {}
  if not terr then
    local vals = redis.call('HMGET', tenant_key(tenant), unpack(TENANT_FIELDS))
    for j = 1, #TENANT_FIELDS do
      th[TENANT_FIELDS[j]] = vals[j]
    end
  end
  -- A tenant at its in-flight cap or out of tokens leaves the fair-share set until a lease of
  -- its ends or a token is back (the parked set), so it is never scanned again meanwhile.
  local parked_until = nil
  local room = n - #out
  local cap = num(th.max_inflight, 0)
  local inflight = num(th['n:leased'], 0) + (leased_now[tenant] or 0)
  if cap > 0 and inflight >= cap then
    parked_until = PARKED_CAPPED
  end
  if cap > 0 then room = math.max(1, math.min(room, cap - inflight)) end
  local tokens, rate = bucket_tokens(th, now)
  if not parked_until and tokens and tokens < 1 then
    parked_until = now + math.ceil((1 - tokens) * 1000 / rate)
  end
  if tokens then room = math.max(1, math.min(room, math.floor(tokens))) end
  if terr then
    redis.call('ZREM', K_TENANTS, tenant)
    repaired(1)
  elseif parked_until then
    redis.call('ZREM', K_TENANTS, tenant)
    redis.call('ZADD', K_PARKED, istr(parked_until), tenant)
  else
    local weight = num(th.weight, 1)
    if weight <= 0 then weight = 1 end
    -- A tenant skipped while limited kept its old virtual time; it restarts at the queue's
    -- current one, so a lifted limit does not turn into a burst of stored-up credit.
    local queue_vt = queue_vtime()
    if vt < queue_vt then vt = queue_vt end
    -- How many picks in a row: while (its virtual time, name) stays before the next tenant's
    -- in the tenants set's order, as one pick per pass would have found.
    local k = 1
    if #head >= 4 then
      local next_name, next_vt = head[3], num(head[4], 0)
      local v = vt + 1 / weight
      while k < room and (v < next_vt or (v == next_vt and tenant < next_name)) do
        k = k + 1
        v = v + 1 / weight
      end
    else
      k = room
    end
    local popped = redis.call('ZPOPMIN', ready_key(tenant), k)
    if #popped == 0 then
      redis.call('ZREM', K_TENANTS, tenant)
    else
      local last_vt = vt
      for j = 2, #popped / 2 do
        last_vt = last_vt + 1 / weight
        vt = last_vt
      end
      redis.call('HSET', K_STATS, 'vtime', fstr(last_vt))
      if redis.call('ZCARD', ready_key(tenant)) == 0 then
        redis.call('ZREM', K_TENANTS, tenant)
      else
        redis.call('ZADD', K_TENANTS, fstr(last_vt + 1 / weight), tenant)
      end
      local served = 0
      for j = 1, #popped, 2 do
        local id = popped[j]
        local key = task_key(id)
        -- One HGETALL gives the fields the lease needs and the reply (the record as it was; the
        -- caller applies what the HSET below writes, from the epoch and attempt in the reply).
        local flat = redis.pcall('HGETALL', key)
        -- Field -> index of its value in flat. The constructor sizes the table for a record's
        -- usual fields (the nils reserve their slots), sparing the rehashes of a growing one.
        local at = {tenant = nil, type = nil, payload = nil, created_at = nil, status = nil,
          priority = nil, attempt = nil, epoch = nil}
        if flat.err then
          flat = nil
        else
          for j2 = 1, #flat, 2 do
            at[flat[j2]] = j2 + 1
          end
        end
        local status = flat and at.status and flat[at.status]
        if status == 'queued' then
          served = served + 1
          local epoch = next_count(key, 'epoch', at.epoch and flat[at.epoch])
          local attempt = next_count(key, 'attempt', at.attempt and flat[at.attempt])
          local lease_ms = num(at.lease_ms and flat[at.lease_ms], LEASE_MS_DEFAULT)
          if lease_ms < 1 or lease_ms > 86400000 then lease_ms = LEASE_MS_DEFAULT end
          local exp = now + math.floor(lease_ms)
          -- When the task became ready: its last change, or its creation when never changed.
          local updated_at = (at.updated_at and flat[at.updated_at]) or (at.created_at and flat[at.created_at])
          -- epoch and attempt first: where they are missing, HINCRBY would have added them first.
          local epoch_s, exp_s = istr(epoch), istr(exp)
          -- No leased_at (updated_at is when the lease began, as long as it is held) and no
          -- outcome (it is read only once a lease has ended, and every end writes its own).
          redis.call('HSET', key, 'epoch', epoch_s, 'attempt', istr(attempt), 'token', epoch_s .. '-' .. bits,
            'worker', worker, 'lease_exp', exp_s, 'updated_at', now_s, 'status', 'leased')
          lease_scores[#lease_scores + 1] = exp_s
          lease_scores[#lease_scores + 1] = id
          local wait = math.max(0, now - num(updated_at, now))
          emit(now, 'leased', id, tenant, attempt, 'w', worker, 'epoch', epoch_s,
            'wait_ms', istr(wait))
          flat[#flat + 1] = 'id'
          flat[#flat + 1] = id
          out[#out + 1] = {exp, flat, epoch, attempt}
        else
          -- A ready-set entry whose hash is gone, is not a hash, or is not queued: dropped.
          repaired(1)
        end
      end
      if served > 0 then
        count_status(tenant, 'queued', 'leased', served)
        leased_now[tenant] = (leased_now[tenant] or 0) + served
        if tokens then
          redis.call('HSET', tenant_key(tenant), 'tokens', fstr(tokens - served), 'tokens_at', istr(now))
        end
        count(tenant_key(tenant), 'served', served)
        count(K_STATS, 'served', served)
      end
    end
  end
end
if #lease_scores > 0 then
  redis.call('ZADD', K_LEASES, unpack(lease_scores))
end
flush_counts()
flush_events()

-- When to ask again: now when an eligible tenant has ready work left; otherwise the earliest of
-- the next scheduled run_at and the next rate-limit token; -1 when unknown (paused, or only
-- in-flight caps hold work back: a lease ending frees them).
local next_ms = first_score(K_SCHEDULED)
local refill = redis.call('ZRANGEBYSCORE', K_PARKED, '-inf', '(' .. istr(PARKED_CAPPED), 'LIMIT', 0, 1,
  'WITHSCORES')
if #refill > 0 then
  local at = tonumber(refill[2])
  if at < now then at = now end
  if next_ms < 0 or at < next_ms then next_ms = at end
end
if not paused and #out >= n and redis.call('ZCARD', K_TENANTS) > 0 then
  next_ms = now
end
if paused then
  next_ms = -1
end
return {now, out, next_ms}
