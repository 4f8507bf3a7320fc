-- enqueue: accept one task or a batch, honouring idempotency keys.
--
-- Transition: (new) -> queued, or (new) -> scheduled when run_at is in the future.
-- All items are validated before anything is written, so a bad item rejects the whole batch.
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:          prefix of HASH orq:{q}:task:<id>
--   KEYS[2]  orq:{q}:ready:         prefix of LIST orq:{q}:ready:<priority>:<tenant>
--   KEYS[3]  orq:{q}:tenants        ZSET tenants with ready work, score=virtual time
--   KEYS[4]  orq:{q}:scheduled      ZSET score=run_at ms
--   KEYS[9]  orq:{q}:idem:          prefix of STRING orq:{q}:idem:<tenant>:<key> = task id, with TTL
--   KEYS[10] orq:{q}:tenant:        prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats          HASH counters, vtime, events, capped (read once, before any
--                                   write; capped written on the queue's first submit)
--   KEYS[12] orq:{q}:events         STREAM
--   KEYS[13] orq:{q}:known_tenants  ZSET tenant names (a tenant not listed yet is added)
--   KEYS[15] orq:{q}:parked         ZSET tenants held back by a limit (a parked tenant stays parked;
--                                   read only for a tenant without ready work before the call)
--
-- ARGV:
--   ARGV[1]  integer  n, number of tasks (1..1000)
--   then n groups of 6 values, one group per task. A setting marked (default) may be '', which
--   means that default and costs the script no parsing or validation (the client sends '' for
--   every setting left at its default):
--     id           string   ULID made by the client (no space or newline: the event stream's
--                           batch entries separate values with spaces, lib/events.lua)
--     tenant       string   tenant name (validated by the caller: [A-Za-z0-9._-]{1,64}; no
--                           space or newline)
--     type         string   handler name
--     payload      bytes    JSON payload
--     priority     integer  0..9, 9 most urgent (default 0)
--     settings     string   '' when every one of the twelve settings below is at its default
--                           (most tasks: six values a task instead of seventeen), else the twelve
--                           joined by commas, in this order, each '' for its default (trace, the
--                           last, may hold commas itself: it is everything after the eleventh):
--     run_at       integer  ms since epoch, or '' to use delay
--     delay        integer  ms from the store's now, used when run_at is '' (default 0)
--     max_retries  integer  0..100 (default 3, lib/task.lua TASK_DEFAULTS)
--     b_init       integer  first backoff, ms, 0..FACTS.backoff_initial_ms_max (default 1000)
--     b_mult       number   backoff multiplier, 1..100 (default 2)
--     b_max        integer  backoff cap, ms, 0..604800000 (default 300000)
--     b_jitter     number   jitter fraction 0..1 (default 0.2)
--     lease_ms     integer  lease length, ms, FACTS.lease_ms_min..FACTS.lease_ms_max (default
--                           30000)
--     timeout_ms   integer  handler timeout ms, 1..FACTS.timeout_ms_max, or '' for none
--     idem         string   idempotency key (validated by the caller: [A-Za-z0-9._:-], so
--                           never a comma), or '' for none; keys are scoped by tenant, so two
--                           tenants never see each other's tasks
--     idem_ttl_ms  integer  how long the idempotency key is remembered, ms, 1..31622400000;
--                           required with an idempotency key, ignored without one
--     trace        string   the W3C trace context of the submit (`orq::trace::TraceContext`:
--                           traceparent, then a comma and tracestate when there is one), stored
--                           as the task's trace field for its workers' spans; printable ASCII
--                           (bytes 32..126: never a NUL, so the lease reply may join it),
--                           at most FACTS.trace_context_max_bytes bytes; '' for none
--
-- Returns: {now_ms, {item, ...}, fresh} with one item per task, in order: 1 for a new task (the
--   record is what the caller sent, with created_at = updated_at = now_ms and run_at = run_at, or
--   now_ms + delay; its status is scheduled when that run_at is later than now_ms, else queued:
--   the caller knows all of it, so none of it is sent back), or {0, fields} when an
--   idempotency key (or the id) matched an existing task, fields being that task as lib/task.lua's
--   `task_view` gives it (the compact hash, flat, then id); fresh is 1 when the
--   queue's stats hash did not exist before this call (the queue's first enqueue in this store,
--   or the first since the store lost its data, so the caller records the queue in the registry
--   orq:queues again), else 0.
-- Errors: INVALID <message> (nothing written); LIMITED <tenant> max_queued retry_after_ms=<n>
--   (a tenant's waiting tasks would exceed its max_queued; nothing written); CORRUPT <key> (a key
--   it would read or write holds another Redis type than orq's; nothing written: the stats hash
--   and each item's task key and idempotency key are checked always; events and the scheduled set
--   when the call adds a task of theirs; the tenant hash when the call reads it (a tenant adding a
--   scheduled task, a queue with capped tenants or whose count of them is unknown, or a ready
--   list of the tenant that was empty: lib/capped.lua); the ready list by the push of the tasks
--   it adds to it; the known tenants when it adds a task of a read tenant whose hash does not
--   show them listing it (or on the queue's first submit); the parked and tenants sets when an
--   added task may make a tenant without ready work eligible. The pushes are the first write:
--   a refusal after them takes them back).
-- Emits: queued or scheduled, one per new task. Publishes: the queue's wake-up when it adds a task
--   (lib/park.lua, wake).
--
-- Uses: ctx, format, args, keys, counters, events, park, task, ready, capped

local c = new_ctx(KEYS)

local GROUP = 6
-- Settings packed into an item's sixth value (the last, trace, may hold commas).
local SETTINGS = 12
-- The packed settings' start when all but the trace are at their defaults.
local ONLY_TRACE = string.rep(',', SETTINGS - 1)
local BATCH_MAX = 1000
-- The Retry-After suggested to a submit refused by max_queued (ms).
local ADMISSION_RETRY_MS = 1000

local now = now_ms()
local n, e = arg_int(ARGV[1], 'count', 1, BATCH_MAX)
if not n then
  return redis.error_reply(e)
end
if #ARGV ~= 1 + n * GROUP then
  return redis.error_reply('INVALID expected ' .. istr(1 + n * GROUP) .. ' arguments')
end

-- Validate every item before the first write. A setting sent as '' is its default (no parsing);
-- an item that sends any retry-policy setting keeps its whole policy in `policy` (logical name
-- -> number); an item without (most) has none, and stores none.
local D = POLICY_DEFAULTS
local items = {}
local any_trace = false   -- whether any item sent a trace context (most batches: none)
for i = 1, n do
  local b = 1 + (i - 1) * GROUP
  -- Every field an item gets but its trace, named in the constructor (the nils reserve their slots), so the
  -- table is sized once instead of rehashed as it fills.
  local it = {id = ARGV[b + 1], tenant = ARGV[b + 2], type = ARGV[b + 3], payload = ARGV[b + 4],
    priority = nil, run_at = nil, timeout_ms = nil, idem = nil, idem_ttl = nil, policy = nil,
    existed = nil, new = nil, rk = nil}
  if it.id == '' or it.tenant == '' or it.type == '' then
    return redis.error_reply('INVALID item ' .. istr(i) .. ': id, tenant and type are required')
  end
  local err
  local p5 = ARGV[b + 5]
  local p6, p7, p8, p9, p10, p11, p12, p13, p14, p15, p16 = '', '', '', '', '', '', '', '', '', '', ''
  local packed = ARGV[b + 6]
  if packed ~= '' then
    local trace
    if string.sub(packed, 1, SETTINGS - 1) == ONLY_TRACE then
      -- Every setting but the trace at its default (a traced task's usual settings): no split.
      trace = string.sub(packed, SETTINGS)
    else
      local f, k = {}, 0
      for v in string.gmatch(packed .. ',', '([^,]*),') do
        k = k + 1
        f[k] = v
      end
      if k < SETTINGS then
        return redis.error_reply('INVALID item ' .. istr(i) .. ': settings must be '
          .. istr(SETTINGS) .. ' comma-separated values')
      end
      p6, p7, p8, p9, p10, p11, p12, p13, p14, p15, p16 = unpack(f, 1, SETTINGS - 1)
      trace = k == SETTINGS and f[k] or table.concat(f, ',', SETTINGS, k)
    end
    if trace ~= '' then
      if #trace > FACTS.trace_context_max_bytes or string.find(trace, '[^\32-\126]') then
        return redis.error_reply('INVALID item ' .. istr(i) .. ': trace must be printable ASCII of at most '
          .. istr(FACTS.trace_context_max_bytes) .. ' bytes')
      end
      -- Not among the constructor's fields: a slot each task would pay for (~500 instructions
      -- a task); the table has room for it (docs/measurements.md, "Trace context").
      it.trace = trace
      any_trace = true
    end
  end
  it.priority, err = opt_int(p5, 0, 'priority', 0, 9)
  if not it.priority then return redis.error_reply(err) end
  if p6 ~= '' then
    it.run_at, err = arg_int(p6, 'run_at', 0, 253402300799999)
    if not it.run_at then return redis.error_reply(err) end
  elseif p7 == '' then
    it.run_at = now
  else
    local delay
    delay, err = arg_int(p7, 'delay', 0, 31622400000)
    if not delay then return redis.error_reply(err) end
    it.run_at = now + delay
  end
  if not (p8 == '' and p9 == '' and p10 == '' and p11 == '' and p12 == '' and p13 == '') then
    local pol = {}
    pol.max_retries, err = opt_int(p8, D.max_retries, 'max_retries', 0, 100)
    if not pol.max_retries then return redis.error_reply(err) end
    pol.b_init, err = opt_int(p9, D.b_init, 'backoff.initial_ms', 0, FACTS.backoff_initial_ms_max)
    if not pol.b_init then return redis.error_reply(err) end
    pol.b_mult, err = opt_num(p10, D.b_mult, 'backoff.multiplier', 1, 100)
    if not pol.b_mult then return redis.error_reply(err) end
    pol.b_max, err = opt_int(p11, D.b_max, 'backoff.max_ms', 0, 604800000)
    if not pol.b_max then return redis.error_reply(err) end
    pol.b_jitter, err = opt_num(p12, D.b_jitter, 'backoff.jitter', 0, 1)
    if not pol.b_jitter then return redis.error_reply(err) end
    pol.lease_ms, err = opt_int(p13, D.lease_ms, 'lease_ms', FACTS.lease_ms_min, FACTS.lease_ms_max)
    if not pol.lease_ms then return redis.error_reply(err) end
    it.policy = pol
  end
  if p14 ~= '' then
    it.timeout_ms, err = arg_int(p14, 'timeout_ms', 1, FACTS.timeout_ms_max)
    if not it.timeout_ms then return redis.error_reply(err) end
  end
  it.idem = p15
  if it.idem ~= '' then
    it.idem_ttl, err = arg_int(p16, 'idem_ttl_ms', 1, 31622400000)
    if not it.idem_ttl then return redis.error_reply(err) end
  end
  items[i] = it
end

-- Ids and tenants appear in the event stream's batch entries, space-separated (lib/events.lua): none
-- may hold a space or a newline. One search over all of them, then (only when it finds one) a
-- search per item to name it.
local joined
if n == 1 then
  joined = items[1].id .. items[1].tenant
else
  local names = {}
  for i = 1, n do
    names[2 * i - 1] = items[i].id
    names[2 * i] = items[i].tenant
  end
  joined = table.concat(names)
end
if has_separator(joined) then
  for i = 1, n do
    if has_separator(items[i].id .. items[i].tenant) then
      return redis.error_reply('INVALID item ' .. istr(i)
        .. ': id and tenant must not contain spaces or newlines')
    end
  end
end

-- The queue keys' types are checked where the call reads or writes them, each before the first
-- write: the stats hash here (its read), the task keys and tenant hashes per item below, then
-- the keys only a new task writes (known tenants, events, scheduled, and the parked and tenants
-- sets when a tenant becomes ready); the ready lists by their pushes, the first write.
local bad = check_keys(c, {})
if bad then return bad end

-- The stats hash, read once: its type, whether it exists, the queue's virtual time (lib/park.lua)
-- and the last event's id (lib/events.lua).
local sf = redis.pcall('HMGET', c.K_STATS, 'total:enqueued', 'vtime', 'events', CAPPED)
if sf.err then
  return type_error(c.K_STATS, 'hash') or redis.error_reply(sf.err)
end
events_read(c, sf[3])
-- Every task this store ever created wrote the stats hash (total:enqueued), so its absence marks
-- a queue new to this store (asked of Redis only when none of the fields read is there).
local fresh = 0
if not (sf[1] or sf[2] or sf[3]) and redis.call('EXISTS', c.K_STATS) == 0 then
  fresh = 1
end
-- The queue's count of capped tenants (lib/capped.lua). A queue that never took a task and knows
-- no tenant has none: its first submit starts the count (written with the other writes).
local capped = capped_parse(sf[4])
local capped_starts = false
if not sf[4] and not sf[1] then
  local kn = redis.pcall('ZCARD', c.K_KNOWN)
  if type(kn) == 'table' then
    return type_error(c.K_KNOWN, 'zset') or redis.error_reply(kn.err)
  end
  if kn == 0 then
    capped, capped_starts = 0, true
  end
end

-- Whether any item's task key exists: one EXISTS for the batch, so that in the common case (fresh
-- ULIDs) no item pays for its own TYPE call. Only when one exists does each item check its key.
local task_keys = {}
for i = 1, n do
  task_keys[i] = task_key(c, items[i].id)
end
local any_task_key = redis.call('EXISTS', unpack(task_keys)) > 0
local created_ids = {}    -- ids created by earlier items of this batch

-- Which items match an existing task (idempotency key or id): those add nothing. Returns the
-- task id or nil, and a CORRUPT error reply when the idempotency key or the task key holds
-- another Redis type than orq's.
local function existing_task(it)
  if it.idem ~= '' then
    local ik = c.K_IDEM .. it.tenant .. ':' .. it.idem
    local prior = redis.pcall('GET', ik)
    if type(prior) == 'table' then
      return nil, type_error(ik, 'string')
    end
    if prior then
      local pt = key_type(task_key(c, prior))
      if pt == 'hash' then
        return prior, nil
      elseif pt ~= 'none' then
        return nil, type_error(task_key(c, prior), 'hash')
      end
    end
  end
  if created_ids[it.id] then
    return it.id, nil
  end
  if not any_task_key then
    return nil, nil
  end
  local t = key_type(task_key(c, it.id))
  if t == 'hash' then
    return it.id, nil
  elseif t ~= 'none' then
    return nil, type_error(task_key(c, it.id), 'hash')
  end
  return nil, nil
end

-- Which items add a task (`it.new`): not matching a stored task (its idempotency key or id),
-- nor an earlier new item of this batch (its key or id). The ready ones are pushed in the first
-- write, per list (`ready`: list key -> {id, ...}, keys in first-use order). Admission: a tenant's
-- waiting tasks (queued, scheduled, retrying) may not exceed its max_queued. Checked for the
-- whole batch before the first write, so a refused batch stores nothing.
local adding = {}
local adders = {}         -- the tenants adding tasks, in first-seen order
local listed = {}         -- tenant -> true when its hash shows the known tenants list it
local scheduling = {}     -- tenant -> how many of its new tasks are scheduled (nil: none)
local any_scheduled = false
local new_idem = {}       -- '<tenant>:<key>' of the batch's new items
local new_ids = {}        -- ids of the batch's new items
local ready = {}
local list_tenant = {}    -- ready list key -> its tenant
for i = 1, n do
  local it = items[i]
  local existing
  existing, bad = existing_task(it)
  if bad then return bad end
  it.existed = existing
  local ik = it.idem ~= '' and it.tenant .. ':' .. it.idem
  if not existing and not new_ids[it.id] and not (ik and new_idem[ik]) then
    it.new = true
    new_ids[it.id] = true
    if ik then new_idem[ik] = true end
    local add = adding[it.tenant]
    if not add then adders[#adders + 1] = it.tenant end
    adding[it.tenant] = (add or 0) + 1
    if it.run_at > now then
      any_scheduled = true
      scheduling[it.tenant] = (scheduling[it.tenant] or 0) + 1
    else
      local rk = ready_key(c, it.tenant, it.priority)
      it.rk = rk
      -- A list's ids: the one id a list gets from most batches spread over many tenants, as a
      -- string; a table once it gets a second (a table per list cost ~1,500 instructions).
      local r = ready[rk]
      if not r then
        ready[rk] = it.id
        list_tenant[rk] = it.tenant
        ready[#ready + 1] = rk
      elseif type(r) == 'string' then
        ready[rk] = {r, it.id}
      else
        r[#r + 1] = it.id
      end
    end
  end
end
-- A tenant's hash, read for its admission fields and mask: a CORRUPT reply when it is not a hash,
-- else its max_queued, n:scheduled and n:retrying as read. Records the mask (c.tenant_rps) and
-- whether the hash shows the known tenants listing it (`listed`).
local read = {}           -- tenant -> true once its hash was read in this call
local function read_tenant(tenant)
  local tk = tenant_key(c, tenant)
  local f = redis.pcall('HMGET', tk, 'max_queued', 'n:scheduled', 'n:retrying', 'rp')
  if f.err then
    -- Not a hash (the reply names the key and its type).
    return type_error(tk, 'hash') or redis.error_reply(f.err)
  end
  read[tenant] = true
  c.tenant_errors[tenant] = false
  -- A hash with any of these fields is a tenant the known tenants list: the calls that write them
  -- (a submit, configure, the moves of its tasks) list it first (the simulator checks it).
  listed[tenant] = f[1] or f[2] or f[3] or f[4]
  -- The tenant's ready-list mask (lib/ready.lua), read here with the admission fields.
  if c.tenant_rps[tenant] == nil then c.tenant_rps[tenant] = rp_parse(f[4]) end
  return nil, f
end
-- Whether no tenant of the queue has a max_queued (the stats hash's exact count, lib/capped.lua):
-- then a tenant adding only ready tasks needs no read before the pushes, and none at all when
-- each of its lists already held ids (the tenant then has ready work: it is known, its mask
-- marks those lists, and it is in the tenants or the parked set).
local uncapped = capped == 0
for j = 1, #adders do
  local tenant = adders[j]
  if not uncapped or scheduling[tenant] then
    local err, f = read_tenant(tenant)
    if err then return err end
    local cap = tonumber(f[1])
    if cap and cap >= 0 then
      -- Its queued tasks are its ready lists' entries (a tenant's hash does not count them).
      local waiting = ready_total(c, tenant, c.tenant_rps[tenant]) + (tonumber(f[2]) or 0)
        + (tonumber(f[3]) or 0)
      if waiting + adding[tenant] > cap then
        return redis.error_reply('LIMITED ' .. tenant .. ' max_queued retry_after_ms=' .. istr(ADMISSION_RETRY_MS))
      end
    end
  end
end
if #adders > 0 then
  bad = type_error(c.K_EVENTS, 'stream')
  if bad then return bad end
end
if any_scheduled then
  bad = type_error(c.K_SCHEDULED, 'zset')
  if bad then return bad end
end

-- The first write: the ready lists, one RPUSH per tenant and priority. A push to a key of another
-- type fails, and so may a check after the pushes: the pushes made are taken back (RPOP of what
-- each added) and the call answers CORRUPT with nothing written, as checks before them would.
local pushed = 0
-- How many ids the batch adds to the list `rk` (its ids: one string, or a table).
local function pushing(rk)
  local ids = ready[rk]
  return type(ids) == 'string' and 1 or #ids
end
local function take_back(reply)
  for k = 1, pushed do
    redis.call('RPOP', ready[k], istr(pushing(ready[k])))
  end
  return reply
end
local marked = {}         -- ready list key -> true once its tenant's mask is marked
for j = 1, #ready do
  local rk = ready[j]
  local ids = ready[rk]
  local len
  if type(ids) == 'string' then
    len = redis.pcall('RPUSH', rk, ids)
  else
    len = redis.pcall('RPUSH', rk, unpack(ids))
  end
  if type(len) == 'table' then
    return take_back(type_error(rk, 'list') or redis.error_reply(len.err))
  end
  pushed = j
  local tenant = list_tenant[rk]
  if not read[tenant] then
    if len > pushing(rk) then
      -- The list held ids: its bit of the mask is set already.
      marked[rk] = true
    else
      -- It was empty: the tenant's mask decides whether it had ready work.
      local err = read_tenant(tenant)
      if err then return take_back(err) end
    end
  end
end

-- The keys only new tasks write, checked before the other writes (a refusal takes the pushes
-- back). Per tenant whose hash was read: whether the known tenants list it (known when its hash
-- has admission fields; else a ZSCORE, which checks the set's type too; a new one is added), and,
-- when it gets a ready task but had no ready work (its mask: a tenant with ready work is in the
-- tenants or the parked set already, lib/ready.lua), whether it is parked (it stays parked) or
-- becomes eligible for fair share (the ZADD NX after the writes).
local known_new = {}      -- tenant -> true when the known tenants do not list it
local eligible_t = {}     -- tenant -> true when its ready tasks make it eligible
local any_eligible = false
local any_parked = nil    -- whether the parked set holds any tenant (read when first needed)
for j = 1, #adders do
  local tenant = adders[j]
  -- A tenant not read had ready work in every list it adds to: known, and not newly eligible.
  if read[tenant] and not listed[tenant] then
    local z = redis.pcall('ZSCORE', c.K_KNOWN, tenant)
    if type(z) == 'table' then
      return take_back(type_error(c.K_KNOWN, 'zset') or redis.error_reply(z.err))
    end
    known_new[tenant] = not z
    -- A tenant new to the queue has no ready list: its mask is exact (0), so this call stores it
    -- with its first ready task and the next submit trusts the hash (`listed`).
    if not z and c.tenant_rps[tenant] < 0 then c.tenant_rps[tenant] = 0 end
  end
  -- Whether one of its new tasks is ready at once.
  local readying = adding[tenant] > (scheduling[tenant] or 0)
  if read[tenant] and readying and not rp_any(c.tenant_rps[tenant]) then
    if any_parked == nil then
      local pc = redis.pcall('ZCARD', c.K_PARKED)
      if type(pc) == 'table' then
        return take_back(type_error(c.K_PARKED, 'zset') or redis.error_reply(pc.err))
      end
      any_parked = pc > 0
    end
    if not (any_parked and redis.call('ZSCORE', c.K_PARKED, tenant)) then
      eligible_t[tenant] = true
      any_eligible = true
    end
  end
end
if any_eligible then
  bad = type_error(c.K_TENANTS, 'zset')
  if bad then return take_back(bad) end
end

-- The other writes. Per task: one HSET of the whole record (its status too, unless queued), one
-- XADD; per call: the scheduled set, the known tenants and the fair-share set (one ZADD each for
-- all the call's tenants), the status counters (deferred, lib/counters.lua), and one trim of the
-- event stream.
defer_events(c)
defer_counts(c)
local vtime = nil
local now_s = istr(now)
local scheduled = {}      -- {score, id, ...}
local known_args = {}     -- {'0', tenant, ...}: the known tenants' ZADD (new tenants only)
local eligible = {}       -- {vtime, tenant, ...}: the fair-share set's ZADD NX
local out = {}
-- The new tasks' statuses in first-seen order (the status counters are counted in that order);
-- how many are queued. (Per tenant only the scheduled ones are counted, `scheduling`: a tenant's
-- hash counts no queued tasks, lib/counters.lua.)
local statuses = {}
local queued_added = 0
local total_added = 0
for i = 1, n do
  local it = items[i]
  if not it.new then
    -- The task it matches: with an idempotency key, the one the key names now (an earlier item
    -- of this batch may have set it); without, its own id (stored, or created by an earlier item).
    local existing = it.idem ~= '' and existing_task(it) or it.existed or it.id
    out[i] = {0, task_view(c, existing)}
  else
    local key = task_keys[i]
    local status = 'queued'
    if it.run_at > now then
      status = 'scheduled'
    end
    -- The compact record (lib/task.lua, TASK_DEFAULTS and F, in the stored names): no id or queue
    -- (the key names both), no updated_at (it is created_at until the first change), no run_at
    -- when it is created_at, a policy field only where it differs from the default, and no
    -- status when queued.
    -- (The two nils size the table for a priority, which most tasks have, so that adding it
    -- does not grow the table.)
    local fieldsv = {F.tenant, it.tenant, F.type, it.type, F.payload, it.payload,
      F.created_at, now_s, nil, nil}
    if it.run_at ~= now then
      fieldsv[#fieldsv + 1] = F.run_at
      fieldsv[#fieldsv + 1] = istr(it.run_at)
    end
    if it.priority ~= 0 then
      fieldsv[#fieldsv + 1] = F.priority
      fieldsv[#fieldsv + 1] = istr(it.priority)
    end
    -- The retry policy: an item that sent none of it (no `policy`) has the defaults.
    local pol = it.policy
    for f = 1, pol and #POLICY or 0 do
      local name = POLICY[f]
      local v = pol[name]
      if v ~= POLICY_DEFAULTS[name] then
        fieldsv[#fieldsv + 1] = F[name]
        if name == 'b_mult' or name == 'b_jitter' then
          fieldsv[#fieldsv + 1] = fstr(v)
        else
          fieldsv[#fieldsv + 1] = istr(v)
        end
      end
    end
    if it.timeout_ms then
      fieldsv[#fieldsv + 1] = F.timeout_ms
      fieldsv[#fieldsv + 1] = istr(it.timeout_ms)
    end
    if any_trace and it.trace then
      fieldsv[#fieldsv + 1] = F.trace
      fieldsv[#fieldsv + 1] = it.trace
    end
    if it.idem ~= '' then
      fieldsv[#fieldsv + 1] = F.idem
      fieldsv[#fieldsv + 1] = it.idem
      redis.call('SET', c.K_IDEM .. it.tenant .. ':' .. it.idem, it.id, 'PX', it.idem_ttl)
    end
    if status ~= 'queued' then
      fieldsv[#fieldsv + 1] = F.status
      fieldsv[#fieldsv + 1] = status
    end
    redis.call('HSET', key, unpack(fieldsv))
    created_ids[it.id] = true
    if known_new[it.tenant] then
      known_new[it.tenant] = false
      known_args[#known_args + 1] = '0'
      known_args[#known_args + 1] = it.tenant
    end
    -- Counted at the end: per status, in first-seen order.
    if status == 'queued' then
      if queued_added == 0 then statuses[#statuses + 1] = status end
      queued_added = queued_added + 1
    elseif total_added == queued_added then
      statuses[#statuses + 1] = status
    end
    total_added = total_added + 1
    if status == 'scheduled' then
      scheduled[#scheduled + 1] = istr(it.run_at)
      scheduled[#scheduled + 1] = it.id
      emit(c, now, 'scheduled', it.id, it.tenant, 0, 'run_at', istr(it.run_at))
    else
      local rk = it.rk
      if not marked[rk] then
        marked[rk] = true
        mark_ready(c, it.tenant, it.priority)
        -- The tenant becomes eligible for fair share at the queue's virtual time when it was
        -- idle (a parked tenant stays parked; decided above): listed once for the ZADD NX after
        -- the loop.
        if eligible_t[it.tenant] then
          eligible_t[it.tenant] = false
          if vtime == nil then vtime = fstr(vtime_of(sf[2])) end
          eligible[#eligible + 1] = vtime
          eligible[#eligible + 1] = it.tenant
        end
      end
      emit(c, now, 'queued', it.id, it.tenant, 0)
    end
    out[i] = 1
  end
end
if #known_args > 0 then
  redis.call('ZADD', c.K_KNOWN, unpack(known_args))
end
if #eligible > 0 then
  redis.call('ZADD', c.K_TENANTS, 'NX', unpack(eligible))
end
if #scheduled > 0 then
  redis.call('ZADD', c.K_SCHEDULED, unpack(scheduled))
end
if total_added > 0 then
  -- Ready tasks for idle workers, or a scheduled one that may be due before what they wait for.
  wake(c)
  count(c, c.K_STATS, 'total:enqueued', total_added)
  for j = 1, #statuses do
    if statuses[j] == 'queued' then
      count_status(c, nil, nil, 'queued', queued_added)
    else
      -- Scheduled: each tenant's, in the order the tenants first added a task.
      for k = 1, #adders do
        local tenant = adders[k]
        if scheduling[tenant] then count_status(c, tenant, nil, 'scheduled', scheduling[tenant]) end
      end
    end
  end
end
flush_counts(c)
flush_events(c)
if capped_starts then
  redis.call('HSET', c.K_STATS, CAPPED, '0')
end
return {now, out, fresh}
