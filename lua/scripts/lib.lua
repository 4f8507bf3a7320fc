-- lib.lua: helpers shared by every transition script. orq-lua prepends this file to each script
-- before computing its SHA1, so Redis and the simulator run one self-contained chunk.
-- Everything here is `local`: Redis refuses scripts that create globals.
--
-- The queue key set. Every script is called with the same KEYS, built by one Rust function
-- (`orq::keys::QueueKeys`), all sharing the queue's hash tag `{q}` so one script touches one
-- Redis Cluster slot. Three entries are key prefixes rather than keys: the task hash, the ready
-- lists and the tenant hash of an id or tenant the script finds inside an index (DESIGN.md, Redis
-- keys; docs/design-notes.md, note 25).
--   KEYS[1]  orq:{q}:task:           prefix of HASH orq:{q}:task:<id>, the task's fields in their
--                                    stored names (F below; no status while queued)
--   KEYS[2]  orq:{q}:ready:          prefix of LIST orq:{q}:ready:<p>:<tenant>, the ids of the
--                                    tenant's queued tasks of priority p (0..9), oldest first
--   KEYS[3]  orq:{q}:tenants         ZSET tenants with ready work, score=virtual time
--   KEYS[4]  orq:{q}:scheduled       ZSET scheduled and retrying tasks, score=run_at ms
--   KEYS[5]  orq:{q}:leases          ZSET leased tasks, score=lease deadline ms
--   KEYS[6]  orq:{q}:dead            ZSET dead tasks, score=time of death ms
--   KEYS[7]  orq:{q}:completed       ZSET completed tasks, score=finish time ms
--   KEYS[8]  orq:{q}:cancelled       ZSET cancelled tasks, score=cancel time ms
--   KEYS[9]  orq:{q}:idem:           prefix of STRING orq:{q}:idem:<tenant>:<key> = task id, TTL
--   KEYS[10] orq:{q}:tenant:         prefix of HASH orq:{q}:tenant:<tenant> (weight, limits, counters,
--                                    rp: the ready-list mask, a bit per priority whose list holds ids)
--   KEYS[11] orq:{q}:stats           HASH queue counters (n:<status>, total:<event>, vtime, events)
--   KEYS[12] orq:{q}:events          STREAM the events of each call, numbered, >= EVENTS_MAX kept
--   KEYS[13] orq:{q}:known_tenants   ZSET every tenant that ever submitted, score=0 (name order)
--   KEYS[14] orq:{q}:config          HASH queue settings: paused (0|1), aging_step_ms
--   KEYS[15] orq:{q}:parked          ZSET tenants with ready work held back by a limit, score=ms
--                                    when eligible again (PARKED_CAPPED: when one of its leases ends)
--   KEYS[16] orq:{q}:workers         ZSET workers seen by lease or heartbeat, score=last call ms
--
-- Wake-ups (design note 27): a call that makes work ready (enqueue, a promotion, a release, a
-- replay, an unparked tenant, a resumed queue) publishes once on the Redis pub/sub channel
-- orq:{q}:wake, so that idle workers lease at once instead of at their next idle poll.
--
-- Error replies start with a code word that `orq::Error::from_script` maps to a variant:
--   NOTFOUND  no such task;  STALE  the lease token is not the current one;
--   CANCELLED the task was cancelled while leased;  CONFLICT  the task is not in a state that
--   allows the transition;  INVALID  an argument failed validation (nothing was written);
--   LIMITED  a tenant limit refused the call (nothing was written), followed by
--   `<tenant> <limit> retry_after_ms=<n>`;  CORRUPT  a key the call needs holds foreign or
--   damaged data: a key of another Redis type than orq's, or a task hash without the fields the
--   transition needs (nothing was written), followed by the key and what is wrong.
--
-- Corrupt or foreign state. Scripts check the Redis type of every queue key they write, and of
-- the task and tenant keys they act on, before their first write (Redis does not roll back, so a
-- WRONGTYPE error half-way through would leave a half-applied transition): a by-id call answers
-- CORRUPT and writes nothing. A script that walks an index (lease, promote, reap, the retention
-- trim) and meets an entry it cannot act on (its task hash is gone or not a hash, its status is
-- not the one the index holds, its tenant is missing or the tenant's keys are of another type)
-- removes the entry from the index, so the queue keeps moving, and counts it in the stats hash
-- field `total:repaired`; the task hash, if any, is left for an operator to inspect. (replay and
-- purge drop a DLQ entry whose hash is gone, answering `notfound`.) Counters (`n:<status>`,
-- `seq`, `served`, ...) that hold a non-integer are reset to the increment and counted in
-- `total:repaired` too; numeric task and tenant fields that are not finite numbers are read as
-- their defaults.

-- Events the event stream keeps at least (whole entries are trimmed, so it holds fewer than
-- EVENTS_MAX + EVENTS_PER_ENTRY); trimmed exactly (XTRIM MAXLEN) so the simulator can model it.
local EVENTS_MAX = 10000
-- Longest a stored error message or history line may be (bytes).
local ERROR_MAX = 2048
-- Attempt history lines kept on a task (older lines are dropped).
local HISTORY_MAX = 20

-- The stored names of a task hash's fields (docs/design-notes.md, note 26): a field's name is
-- stored in every task hash, so the short names save memory on every queued task (Redis keeps a
-- small hash as a listpack of its names and values). Scripts name fields by their long (logical)
-- names, as replies and the API do, and map them with `F` (name -> stored name) at each read and
-- write of a task hash; the Rust side maps them back (orq::task::stored_name, decode::task). `F`
-- is declared by the line before lib.lua, generated from the one list in lua/src/fields.rs. A
-- queued task stores no status: an absent `s` in a hash that has `c` (created_at, which every
-- record has) reads as 'queued'.

local K_TASK, K_READY, K_TENANTS, K_SCHEDULED = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_LEASES, K_DEAD, K_COMPLETED, K_CANCELLED = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local K_IDEM, K_TENANT, K_STATS, K_EVENTS, K_KNOWN = KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13]
local K_CONFIG, K_PARKED, K_WORKERS = KEYS[14], KEYS[15], KEYS[16]

-- Score of a tenant parked at its max_inflight: it waits for one of its leases to end (or for its
-- limits to change), not for a time (2^53 - 1, lua/src/facts.rs).
local PARKED_CAPPED = FACTS.parked_capped

-- The Redis type each queue key holds (the prefixes KEYS[1], KEYS[2], KEYS[9] and KEYS[10] are
-- checked per key, by the scripts that append to them).
local KEY_TYPES = {[3] = 'zset', [4] = 'zset', [5] = 'zset', [6] = 'zset', [7] = 'zset',
  [8] = 'zset', [11] = 'hash', [12] = 'stream', [13] = 'zset', [14] = 'hash', [15] = 'zset',
  [16] = 'zset'}

-- The Redis type of `key` ('none' when it does not exist).
local function key_type(key)
  return redis.call('TYPE', key)['ok']
end

-- A CORRUPT error reply when `key` exists with another type than `want`, else nil.
local function type_error(key, want)
  local t = key_type(key)
  if t ~= 'none' and t ~= want then
    return redis.error_reply('CORRUPT ' .. key .. ' holds a ' .. t .. ', not a ' .. want)
  end
  return nil
end

-- Check the queue key set before the first write: exactly the 16 queue keys, all distinct (INVALID
-- otherwise), and each KEYS[i] for i in `idx` absent or of orq's type (CORRUPT otherwise).
-- Returns the error reply, or nil when all is well.
local function check_keys(idx)
  if #KEYS ~= 16 then
    return redis.error_reply('INVALID expected the 16 queue keys, got ' .. #KEYS)
  end
  -- Sixteen distinct names: two KEYS naming one key would let one write change the type of a
  -- key another part of the script checked (a ZADD to `cancelled` then an HINCRBY to `stats`).
  local seen = {}
  for i = 1, 16 do
    local k = KEYS[i]
    if seen[k] then
      return redis.error_reply('INVALID KEYS[' .. seen[k] .. '] and KEYS[' .. i .. '] name one key')
    end
    seen[k] = i
  end
  for i = 1, #idx do
    local bad = type_error(KEYS[idx[i]], KEY_TYPES[idx[i]])
    if bad then return bad end
  end
  return nil
end

-- The store's clock in integer milliseconds since the Unix epoch.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- An integer as a decimal string (tostring would print large numbers in exponent form).
-- Memoised for the call: string.format costs Redis about 1,650 instructions (callgrind), a
-- table lookup a tenth of that, and a call formats its `now` and small counters many times.
local istr_memo = {}
local function istr(x)
  local s = istr_memo[x]
  if s == nil then
    s = string.format('%d', x)
    -- NaN cannot be a table key (and never equals itself).
    if x == x then istr_memo[x] = s end
  end
  return s
end

-- A float as a string that round-trips exactly.
local function fstr(x)
  return string.format('%.17g', x)
end

-- Parse ARGV[i] as an integer in [lo, hi]; on failure return nil and an INVALID message.
local function arg_int(v, name, lo, hi)
  local n = tonumber(v)
  if n == nil or n ~= math.floor(n) or n < lo or n > hi then
    return nil, 'INVALID ' .. name .. ' must be an integer in [' .. istr(lo) .. ', ' .. istr(hi) .. ']'
  end
  return n
end

-- `v` as a finite number, or `default` when it is absent, not a number, NaN or infinite (a
-- stored field read back: garbage reads as the default instead of spreading).
local function num(v, default)
  local n = tonumber(v)
  if n == nil or n ~= n or n == math.huge or n == -math.huge then
    return default
  end
  return n
end

local function arg_num(v, name, lo, hi)
  local n = tonumber(v)
  if n == nil or n ~= n or n < lo or n > hi then
    return nil, 'INVALID ' .. name .. ' must be a number in [' .. fstr(lo) .. ', ' .. fstr(hi) .. ']'
  end
  return n
end

-- An INVALID error reply naming the first of `names` whose ARGV value is missing or empty, or
-- nil when all are present (scripts validate before they write: Redis does not roll back).
local function require_args(names)
  for i = 1, #names do
    if ARGV[i] == nil or ARGV[i] == '' then
      return redis.error_reply('INVALID ' .. names[i] .. ' is required')
    end
  end
  return nil
end

local function truncate(s, n)
  if string.len(s) > n then
    return string.sub(s, 1, n)
  end
  return s
end

local function task_key(id)
  return K_TASK .. id
end

-- The ready list of `tenant`'s queued tasks of priority `p` (0..9).
local function ready_key(tenant, p)
  -- p + 0: a priority parsed from '-0' is -0, which would print as '-0'.
  return K_READY .. (p + 0) .. ':' .. tenant
end

local function tenant_key(tenant)
  return K_TENANT .. tenant
end

-- Add `delta` to the integer counter `field` of the hash `key` and return the new value. A
-- counter that holds garbage (or would overflow) is reset to `delta` and the reset counted in
-- the stats hash's `total:repaired`: a counter is never worth stopping a transition for. The caller
-- has checked that `key` is a hash (or absent).
local function hincr(key, field, delta)
  local v = redis.pcall('HINCRBY', key, field, delta)
  if type(v) == 'table' and v.err then
    redis.call('HSET', key, field, istr(delta))
    if key ~= K_STATS or field ~= 'total:repaired' then
      hincr(K_STATS, 'total:repaired', 1)
    end
    return delta
  end
  return v
end

-- What `HINCRBY key field 1` would answer when the field holds `stored` (nil: absent), without
-- the call when `stored` is a plain integer; otherwise (garbage) the call is made, through
-- `hincr`, which repairs the field. The caller writes the returned value to the field.
local function next_count(key, field, stored)
  if stored == nil then
    return 1
  end
  local v = tonumber(stored)
  if v and v == math.floor(v) and v > -FACTS.exact_int_max and v < FACTS.exact_int_max and istr(v) == stored then
    return v + 1
  end
  return hincr(key, field, 1)
end

-- Count `n` repairs of corrupt or foreign state in the stats hash (see the header).
local function repaired(n)
  hincr(K_STATS, 'total:repaired', n)
end

-- Counter increments a batch script applies once at its end (`flush_counts`) instead of one
-- HINCRBY per task: key -> field -> delta, with keys and fields in first-use order so the writes
-- are the same on every store. Off (nil) unless the script calls `defer_counts()`; only counters
-- that nothing reads before the flush are deferred (the status counters of `set_status`).
local counts = nil

local function defer_counts()
  counts = {keys = {}, by_key = {}}
end

-- Add `delta` to the counter now, or at the flush when counters are deferred.
local function count(key, field, delta)
  if not counts then
    hincr(key, field, delta)
    return
  end
  local c = counts.by_key[key]
  if not c then
    c = {fields = {}, delta = {}}
    counts.by_key[key] = c
    counts.keys[#counts.keys + 1] = key
  end
  if c.delta[field] == nil then
    c.fields[#c.fields + 1] = field
    c.delta[field] = 0
  end
  c.delta[field] = c.delta[field] + delta
end

-- Apply the deferred counter increments (nothing when none are deferred).
local function flush_counts()
  if not counts then return end
  for i = 1, #counts.keys do
    local key = counts.keys[i]
    local c = counts.by_key[key]
    for j = 1, #c.fields do
      local d = c.delta[c.fields[j]]
      if d ~= 0 then
        hincr(key, c.fields[j], d)
      end
    end
  end
  counts = {keys = {}, by_key = {}}
end

-- Checked once per call (key -> CORRUPT reply or false): a script writes only orq's types, so
-- the answer cannot change within a call.
local tenant_errors, list_errors = {}, {}

-- A CORRUPT error reply when the ready list of (`tenant`, `p`) holds another Redis type; else nil.
local function list_error(tenant, p)
  local key = ready_key(tenant, p)
  local known = list_errors[key]
  if known == nil then
    known = type_error(key, 'list') or false
    list_errors[key] = known
  end
  return known or nil
end

-- A CORRUPT error reply when one of the tenant's own keys holds another Redis type than orq's,
-- or the tenant name is missing; else nil. The keys: its hash, and its ready list of priority
-- `p` (none when `p` is nil: the caller writes no ready list).
local function tenant_error(tenant, p)
  if not tenant or tenant == '' then
    return redis.error_reply('CORRUPT task has no tenant')
  end
  local known = tenant_errors[tenant]
  if known == nil then
    known = type_error(tenant_key(tenant), 'hash') or false
    tenant_errors[tenant] = known
  end
  if known then return known end
  if p then
    return list_error(tenant, p)
  end
  return nil
end

-- The queue's virtual time (a number; garbage reads as 0).
local function queue_vtime()
  return num(redis.call('HGET', K_STATS, 'vtime'), 0)
end

-- The event stream (KEYS[12]). An event is a list of name/value pairs: `k` (its kind; the
-- first pair of an event and the only `k`), `id` (task), `t` (tenant), `a` (attempt), then
-- kind-specific pairs. Each stream entry holds the events of one call, in order, after a `ts`
-- pair (the call's time, ms):
--   - a call that writes one event at a time writes an entry of plain fields: `ts`, `k`, `id`,
--     `t`, `a`, the kind-specific pairs;
--   - a batch call (`defer_events`) writes one entry of two fields, `ts` and `e`, whose value
--     holds up to EVENTS_PER_ENTRY events joined by ' \n ' (space, newline, space), each event
--     its kind, id, tenant, attempt, then its kind-specific names and values, joined by single
--     spaces. No value in an event contains a space or a newline: enqueue refuses such ids and
--     tenants, `lease_args` such worker ids, and an event with a message (`m`), or a completion
--     whose stored worker or tenant has one (damaged data), is written as a plain entry of its
--     own instead (after the pending batch).
-- One XADD of two fields per call instead of an XADD of ten fields per task saves Redis about
-- 10,000 instructions per event (docs/measurements.md).
-- Event IDs. Events are numbered 1, 2, ... per queue, and an entry's ID is `<ms>-<n>`: ms the
-- call's time (never behind the last entry's), n the number of its last event. The i-th of an
-- entry's m events is event n - m + i and readers name it `<ms>-<n - m + i>`
-- (`orq::decode::stream_events`): unique, increasing, valid stream IDs, so a reader's `after`
-- cursor works as before. The time keeps them increasing when Redis loses its latest writes (a
-- failover, a restart) and the numbering goes back with it: new events come after the lost
-- ones, as they did with `*` IDs. The stats hash's `events` holds the last event's ID; without
-- a valid one (a new queue, a lost stats hash) the numbering goes on from the stream's last
-- ID, and when the stream holds a later ID than the record, after it
-- (XADD refuses the ID; counted in `total:repaired`). Trimming keeps whole entries and at least
-- the last EVENTS_MAX events (`finish_events`). A batch call that fails after its first write
-- (out of memory) loses the events it had not written yet.
local EVENTS_PER_ENTRY = 100

-- Whether `s` holds a space or a newline (which separate the values of a batch entry). Plain
-- searches: a pattern class costs Redis ~250 instructions a byte.
local function has_separator(s)
  return string.find(s, ' ', 1, true) ~= nil or string.find(s, '\n', 1, true) ~= nil
end

-- `has_separator`, memoised for the values a call repeats (worker ids and tenants read from
-- task hashes that damage may have written with a space).
local separator_memo = {}
local function repeated_has_separator(s)
  local r = separator_memo[s]
  if r == nil then
    r = has_separator(s)
    separator_memo[s] = r
  end
  return r
end

-- Whether this call writes its events once at its end (`events_deferred`: a batch script calls
-- `defer_events()` first and `flush_events()` before it returns) or with every `emit`.
local events_deferred = false
-- The pending batch: its lines' pieces (table.concat joins them with spaces; a '\n' piece ends
-- a line), how many events they hold, and the call time they share.
local ev_buf = {}
local ev_len = 0
local ev_count = 0
local ev_now = 0

-- A stream ID `<ms>-<seq>` as two numbers, or nil.
local function parse_stream_id(s)
  if type(s) ~= 'string' then return nil end
  local a, b = string.match(s, '^(%d+)%-(%d+)$')
  if not a then return nil end
  return tonumber(a), tonumber(b)
end

-- The id (as two numbers) of the last event this call wrote, and the entries it wrote.
local ev_last_ms, ev_last_n = nil, nil
local ev_entries = 0

-- Write an entry of `m` events whose fields after `ts` are `fields`, at `now`.
local function write_events(now, m, fields)
  if m == 0 then return end
  local lt, ln = ev_last_ms, ev_last_n
  if not lt then
    local rec = redis.call('HGET', K_STATS, 'events')
    lt, ln = parse_stream_id(rec)
    if not lt then
      -- No record (a new queue, a lost stats hash): go on from the stream's last id, if any.
      if rec then repaired(1) end
      local top = redis.call('XREVRANGE', K_EVENTS, '+', '-', 'COUNT', 1)
      if top[1] then lt, ln = parse_stream_id(top[1][1]) end
      lt, ln = lt or 0, ln or 0
    end
  end
  local t, n = math.max(now, lt), ln + m
  local ts = istr(now)
  local id = redis.pcall('XADD', K_EVENTS, istr(t) .. '-' .. istr(n), 'ts', ts, unpack(fields))
  if type(id) == 'table' and id.err then
    -- The stream holds a later id than the record (a stale stats hash, a stream restored
    -- without its stats hash): go on after it. A stream whose last id outlived its entries
    -- starts again.
    local top = redis.call('XREVRANGE', K_EVENTS, '+', '-', 'COUNT', 1)
    local tt, tn = parse_stream_id(top[1] and top[1][1])
    if tt and tt < FACTS.exact_int_max and tn < FACTS.exact_int_max - 2 * EVENTS_PER_ENTRY then
      t, n = tt + 1, tn + m
    else
      redis.call('DEL', K_EVENTS)
      t, n = now, m
    end
    repaired(1)
    redis.call('XADD', K_EVENTS, istr(t) .. '-' .. istr(n), 'ts', ts, unpack(fields))
  end
  ev_last_ms, ev_last_n = t, n
  ev_entries = ev_entries + 1
end

-- After a call's writes: record the last event's id in the stats hash, and drop the oldest
-- entries while the newest EVENTS_MAX events are all after them (an entry whose number is above
-- the last one's was numbered before the counter was reset, so it is old too). Reads as many of
-- the oldest entries as this call wrote, plus one; while every entry read goes, twice as many
-- again, at most eight times a call (up to ~255 × that many entries: old entries of one event
-- each go as fast as new ones of a hundred come).
local function finish_events()
  if ev_entries == 0 then return end
  local n = ev_last_n
  redis.call('HSET', K_STATS, 'events', istr(ev_last_ms) .. '-' .. istr(n))
  if n > EVENTS_MAX then
    local want = ev_entries + 1
    for _ = 1, 8 do
      local old = redis.call('XRANGE', K_EVENTS, '-', '+', 'COUNT', want)
      local drop = 0
      for i = 1, #old do
        local _, on = parse_stream_id(old[i][1])
        if on and on > n then on = 0 end
        if on and on <= n - EVENTS_MAX then drop = drop + 1 else break end
      end
      if drop > 0 then
        redis.call('XTRIM', K_EVENTS, 'MAXLEN', redis.call('XLEN', K_EVENTS) - drop)
      end
      if drop < want then break end
      want = want * 2
    end
  end
  ev_entries = 0
end

-- Write the pending batch as one entry (nothing when there is none).
local function write_batch()
  if ev_count == 0 then return end
  -- The last piece is the last line's '\n', left out.
  write_events(ev_now, ev_count, {'e', table.concat(ev_buf, ' ', 1, ev_len - 1)})
  ev_len = 0
  ev_count = 0
end

-- Write this call's events once, at its end (see `flush_events`).
local function defer_events()
  events_deferred = true
end

-- Record one event for the queue's stream: `k1, v1, k2, v2, k3, v3` are up to three extra
-- name/value pairs (strings; a nil name ends them). Written at once as a plain entry, or
-- (deferred) by `flush_events` as lines of a batch entry.
local function emit(now, kind, id, tenant, attempt, k1, v1, k2, v2, k3, v3)
  local a = istr(attempt)
  if not events_deferred or ((kind == 'retrying' or kind == 'dead')
      and has_separator(table.concat({v1 or '', v2 or '', v3 or ''})))
      or (kind == 'completed' and (repeated_has_separator(v1) or repeated_has_separator(tenant))) then
    write_batch()
    write_events(now, 1, {'k', kind, 'id', id, 't', tenant, 'a', a, k1, v1, k2, v2, k3, v3})
    if not events_deferred then finish_events() end
    return
  end
  if ev_count > 0 and ev_now ~= now then
    write_batch()
  end
  ev_now = now
  local b, i = ev_buf, ev_len
  b[i + 1] = kind
  b[i + 2] = id
  b[i + 3] = tenant
  b[i + 4] = a
  i = i + 4
  if k1 then
    b[i + 1] = k1
    b[i + 2] = v1
    i = i + 2
    if k2 then
      b[i + 1] = k2
      b[i + 2] = v2
      i = i + 2
      if k3 then
        b[i + 1] = k3
        b[i + 2] = v3
        i = i + 2
      end
    end
  end
  b[i + 1] = '\n'
  ev_len = i + 1
  ev_count = ev_count + 1
  if ev_count >= EVENTS_PER_ENTRY then
    write_batch()
  end
end

-- Write the events this call deferred (nothing when there are none), then record and trim.
local function flush_events()
  write_batch()
  finish_events()
end

-- Make a parked tenant eligible again, at the queue's current virtual time (no credit is stored
-- up while parked). Parked tenants always have ready work.
-- Whether this call has published the queue's wake-up.
local woken = false

-- Tell idle workers of the queue that work may be ready (design note 27): one PUBLISH per call on
-- the channel orq:{q}:wake (KEYS[1] without its `task:`), the message empty. Workers that hear
-- it lease at once instead of at their next idle poll; nothing depends on its delivery (a worker
-- that misses it leases at its fallback poll).
local function wake()
  if not woken then
    woken = true
    redis.call('PUBLISH', string.sub(K_TASK, 1, -6) .. 'wake', '')
  end
end

local function unpark(tenant)
  if redis.call('ZREM', K_PARKED, tenant) == 1 then
    redis.call('ZADD', K_TENANTS, 'NX', fstr(queue_vtime()), tenant)
    wake()
  end
end

-- Unpark up to `bound` tenants whose parked-until time has come. Returns the count.
local function unpark_due(now, bound)
  local due = redis.call('ZRANGEBYSCORE', K_PARKED, '-inf', istr(now), 'LIMIT', 0, bound)
  for i = 1, #due do
    unpark(due[i])
  end
  return #due
end

-- Status -> its counter field `n:<status>`, and tenant -> its hash key, memoised for the call
-- (building the strings per task was about 3 % of the Redis instructions of a leased task).
local status_fields, tenant_keys = {}, {}

local function status_field(status)
  local f = status_fields[status]
  if not f then
    f = 'n:' .. status
    status_fields[status] = f
  end
  return f
end

-- Move the count of `n` tasks (default 1) of `tenant` from status `old` (nil for new tasks) to
-- `new`, in the queue's stats hash and the tenant's hash (deferred to the end of the call when
-- counters are deferred). Batch scripts call it once per tenant with the batch's count.
local function count_status(tenant, old, new, n)
  n = n or 1
  local tk = tenant_keys[tenant]
  if not tk then
    tk = tenant_key(tenant)
    tenant_keys[tenant] = tk
  end
  if old then
    local f = status_field(old)
    count(K_STATS, f, -n)
    count(tk, f, -n)
  end
  local f = status_field(new)
  count(K_STATS, f, n)
  count(tk, f, n)
end

-- Move a task's status counter from `old` (may be nil for a new task) to `new` and record the
-- status on the task (a queued task stores none: F). A lease that ends unparks its tenant when
-- the tenant was parked at its max_inflight.
local function set_status(id, tenant, old, new)
  count_status(tenant, old, new)
  if new == 'queued' then
    redis.call('HDEL', task_key(id), F.status)
  else
    redis.call('HSET', task_key(id), F.status, new)
  end
  if old == 'leased' and tonumber(redis.call('ZSCORE', K_PARKED, tenant)) == PARKED_CAPPED then
    unpark(tenant)
  end
end

-- Append a line to the task's attempt history, keeping the last HISTORY_MAX lines.
local function add_history(id, line)
  local key = task_key(id)
  local h = redis.call('HGET', key, F.history)
  local lines = {}
  if h and h ~= '' then
    for l in string.gmatch(h, '[^\n]+') do
      lines[#lines + 1] = l
    end
  end
  lines[#lines + 1] = truncate(string.gsub(line, '\n', ' '), ERROR_MAX)
  local first = 1
  if #lines > HISTORY_MAX then
    first = #lines - HISTORY_MAX + 1
  end
  redis.call('HSET', key, F.history, table.concat(lines, '\n', first, #lines))
end

-- The queue's starvation-bound step (ms; 0 = strict priority). A stored value outside the range
-- `configure` accepts reads as 0.
local function aging_step()
  local step = num(redis.call('HGET', K_CONFIG, 'aging_step_ms'), 0)
  if step < 0 or step > FACTS.aging_step_ms_max then
    return 0
  end
  return step
end

-- A task's priority from its stored field: 0..9 (garbage reads as 0).
local function priority_of(v)
  local p = num(v, 0)
  if p < 0 or p > 9 or p ~= math.floor(p) then
    return 0
  end
  return p
end

-- The ready-list mask: bit p of the tenant hash's `rp` field is set exactly while the tenant's
-- ready list of priority p holds ids, so lease and cancel touch only those lists. Every push
-- sets its bit (mark_ready) and every call that empties a list clears it (a lease pass, cancel).
-- An absent or garbage `rp` (a tenant from before the mask, or a damaged field) is "unknown":
-- lease then looks at all ten lists and stores the exact mask.
local RP_UNKNOWN = -1
local POW2 = {[0] = 1, 2, 4, 8, 16, 32, 64, 128, 256, 512}
-- tenant -> the mask as stored (RP_UNKNOWN when absent or garbage), memoised for the call.
local tenant_rps = {}

local function rp_parse(v)
  local m = tonumber(v)
  if not m or m < 0 or m > 1023 or m ~= math.floor(m) then
    return RP_UNKNOWN
  end
  return m
end

-- Whether bit p of mask m is set (an unknown mask has every bit set).
local function rp_has(m, p)
  return m == RP_UNKNOWN or math.floor(m / POW2[p]) % 2 == 1
end

-- The tenant's stored mask (the caller has checked the tenant hash's type).
local function rp_get(tenant)
  local m = tenant_rps[tenant]
  if m == nil then
    m = rp_parse(redis.call('HGET', tenant_key(tenant), 'rp'))
    tenant_rps[tenant] = m
  end
  return m
end

-- Store the tenant's mask `m` (an exact one) when it differs from the stored one.
local function rp_store(tenant, m)
  if rp_get(tenant) ~= m then
    redis.call('HSET', tenant_key(tenant), 'rp', istr(m))
    tenant_rps[tenant] = m
  end
end

-- Record that the tenant's ready list of priority p is about to receive ids.
local function mark_ready(tenant, p)
  local m = rp_get(tenant)
  if not rp_has(m, p) then
    rp_store(tenant, m + POW2[p])
  end
end

-- Put a task at the tail of its tenant's ready list of its priority (status queued), and make the
-- tenant eligible for fair share at the current virtual time if it was idle (a parked tenant
-- stays parked). The caller has checked the list's type (tenant_error with the priority).
local function to_ready(id, tenant, priority, old, now)
  wake()
  mark_ready(tenant, priority)
  redis.call('RPUSH', ready_key(tenant, priority), id)
  if not redis.call('ZSCORE', K_PARKED, tenant) then
    redis.call('ZADD', K_TENANTS, 'NX', fstr(queue_vtime()), tenant)
  end
  redis.call('HSET', task_key(id), F.updated_at, istr(now))
  set_status(id, tenant, old, 'queued')
end

-- The exact ready-list mask of `tenant`, read from the lists (LLEN) where `m` is unknown. With
-- `count`, a list of another type is counted in `total:repaired` (it counts as empty either
-- way: nothing is leased from it, and submits to it are refused).
local function rp_exact(tenant, m, count)
  if m ~= RP_UNKNOWN then
    return m
  end
  m = 0
  for p = 0, 9 do
    local n = redis.pcall('LLEN', ready_key(tenant, p))
    if type(n) ~= 'number' then
      if count then repaired(1) end
    elseif n > 0 then
      m = m + POW2[p]
    end
  end
  return m
end

-- Remove a queued task of priority `priority` from its tenant's ready list (LREM: O(N) in the
-- list's length), dropping the tenant from the fair-share set (or the parked set) when it has
-- no ready work left.
local function from_ready(id, tenant, priority)
  local key = ready_key(tenant, priority)
  redis.call('LREM', key, 1, id)
  local m = rp_exact(tenant, rp_get(tenant))
  if redis.call('LLEN', key) == 0 and rp_has(m, priority) then
    m = m - POW2[priority]
  end
  rp_store(tenant, m)
  if m == 0 then
    redis.call('ZREM', K_TENANTS, tenant)
    redis.call('ZREM', K_PARKED, tenant)
  end
end

-- The compact task record. A task hash stores only what differs from these values, which every
-- reader fills in for an absent field: enqueue omits them, so a task submitted with the default
-- retry policy stores none of them (written once, in orq_lua::facts::task_defaults; the
-- conformance test `a_default_task_stores_only_what_differs_from_the_defaults` checks both).
-- `id` and `queue` are not stored either: the key names both (`task_view` adds the id to replies,
-- the client knows the queue), and an absent `updated_at` or `run_at` is `created_at`.
local TASK_DEFAULTS = FACTS.task_defaults
-- A task's lease length when its own is absent or not a valid one (ms).
local LEASE_MS_DEFAULT = tonumber(TASK_DEFAULTS.lease_ms)

-- names table -> its HMGET arguments (the stored names, then 'c'), memoised for the call; callers
-- that read in a loop pass the same table each time.
local stored_args = {}

-- Read the named fields (long names) of a task hash into a Lua table keyed by those names
-- (absent fields read as their TASK_DEFAULTS value, or false; an absent status of a record that
-- has `c` reads as 'queued'). When the key holds another Redis type, returns nil and a CORRUPT
-- error reply instead; a missing hash reads as absent fields (callers test `status`).
local function fields(id, names)
  local key = task_key(id)
  local args = stored_args[names]
  if not args then
    args = {}
    for i = 1, #names do
      args[i] = F[names[i]] or error('fields: ' .. names[i] .. ' is no task field')
    end
    args[#names + 1] = 'c'
    stored_args[names] = args
  end
  local vals = redis.pcall('HMGET', key, unpack(args))
  if vals.err then
    return nil, redis.error_reply('CORRUPT ' .. key .. ' holds a ' .. key_type(key) .. ', not a hash')
  end
  local c = vals[#names + 1]
  -- Sized by the constructor for eight fields (the nils reserve slots), so that filling it does
  -- not rehash a growing table (~500 Redis instructions a rehash).
  local t = {status = nil, token = nil, tenant = nil, attempt = nil, worker = nil, updated_at = nil,
    outcome = nil, priority = nil}
  for i = 1, #names do
    local name = names[i]
    t[name] = vals[i] or TASK_DEFAULTS[name] or false
  end
  if t.status == false and c then
    t.status = 'queued'
  end
  return t, nil
end

-- A task as replies show it: its hash, flat (HGETALL, in the stored names: F), then `id`, <id>;
-- empty when there is no such hash. Absent fields stay absent (the reader fills in
-- TASK_DEFAULTS, and 'queued' for an absent status).
local function task_view(id)
  local key = task_key(id)
  local flat = redis.call('HGETALL', key)
  if #flat > 0 then
    flat[#flat + 1] = 'id'
    flat[#flat + 1] = id
  end
  return flat
end

-- Longest backoff ever computed (ms): a year, whatever the stored fields say.
local BACKOFF_MS_MAX = 31622400000

-- Backoff before the next attempt after attempt `attempt` failed (ms): exponential, capped, with
-- +/- jitter drawn from `r` in [0, 1) supplied by the caller.
local function backoff_ms(t, attempt, r)
  local init = num(t.b_init, 1000)
  local mult = num(t.b_mult, 2)
  local max = num(t.b_max, 300000)
  local jitter = num(t.b_jitter, 0)
  local d = init * math.pow(mult, attempt - 1)
  if d > max then
    d = max
  end
  d = d * (1 - jitter + 2 * jitter * r)
  if not (d >= 0) then
    d = 0
  end
  if d > BACKOFF_MS_MAX then
    d = BACKOFF_MS_MAX
  end
  return math.floor(d)
end

local FAIL_FIELDS = {'tenant', 'attempt', 'max_retries', 'b_init', 'b_mult', 'b_max', 'b_jitter', 'worker',
  'status'}

-- A leased task's attempt failed (handler error, timeout or lease expiry): schedule a retry with
-- backoff, or move it to the DLQ when retries are spent or the error is permanent.
-- Returns the new status ('retrying' or 'dead'). The caller has already removed the lease.
local function fail_attempt(id, t, now, err, retryable, r, outcome)
  local attempt = num(t.attempt, 1)
  local max_retries = num(t.max_retries, 0)
  local key = task_key(id)
  err = truncate(err, ERROR_MAX)
  add_history(id, istr(attempt) .. ' ' .. istr(now) .. ' ' .. (t.worker or '-') .. ' ' .. outcome .. ' ' .. err)
  redis.call('HSET', key, F.last_error, err, F.updated_at, istr(now), F.outcome, outcome,
    F.lease_exp, '', F.worker, '')
  hincr(K_STATS, 'total:failed', 1)
  if retryable and attempt < max_retries + 1 then
    local run_at = now + backoff_ms(t, attempt, r)
    redis.call('ZADD', K_SCHEDULED, istr(run_at), id)
    redis.call('HSET', key, F.run_at, istr(run_at))
    set_status(id, t.tenant, 'leased', 'retrying')
    emit(now, 'retrying', id, t.tenant, attempt, 'run_at', istr(run_at), 'm', err)
    return 'retrying'
  end
  redis.call('ZADD', K_DEAD, istr(now), id)
  redis.call('HSET', key, F.finished_at, istr(now))
  hincr(K_STATS, 'total:dead', 1)
  set_status(id, t.tenant, 'leased', 'dead')
  emit(now, 'dead', id, t.tenant, attempt, 'm', err)
  return 'dead'
end

-- How long a worker stays in the workers set after its last lease or heartbeat call (ms).
local WORKER_FORGET_MS = FACTS.worker_forget_ms

-- Record that `worker` called at `now`, and forget up to 8 workers silent for WORKER_FORGET_MS.
local function note_worker(worker, now)
  redis.call('ZADD', K_WORKERS, istr(now), worker)
  local old = redis.call('ZRANGEBYSCORE', K_WORKERS, '-inf', istr(now - WORKER_FORGET_MS), 'LIMIT', 0, 8)
  for i = 1, #old do
    redis.call('ZREM', K_WORKERS, old[i])
  end
end

-- Whether a task read from an index can be acted on: its hash exists, its status is one of
-- `statuses` (a set), and it has a tenant whose keys are of orq's types. An entry that fails is
-- dropped from its index by the caller and counted as repaired (see the header).
-- With `p`, the tenant's ready list of priority p is checked too (the caller appends to it).
local function indexed_ok(t, statuses, p)
  return t ~= nil and t.status and statuses[t.status] and not tenant_error(t.tenant, p)
end

local WAITING = {scheduled = true, retrying = true}
local LEASED = {leased = true}

local PROMOTE_FIELDS = {'tenant', 'priority', 'status', 'attempt'}

-- Move up to `bound` due scheduled/retrying tasks to their ready sets. Returns the count.
local function promote_due(now, bound)
  local due = redis.call('ZRANGEBYSCORE', K_SCHEDULED, '-inf', istr(now), 'LIMIT', 0, bound)
  for i = 1, #due do
    local id = due[i]
    redis.call('ZREM', K_SCHEDULED, id)
    local t = fields(id, PROMOTE_FIELDS)
    if t and indexed_ok(t, WAITING, priority_of(t.priority)) then
      to_ready(id, t.tenant, priority_of(t.priority), t.status, now)
      emit(now, 'queued', id, t.tenant, num(t.attempt, 0), 'from', t.status)
    else
      repaired(1)
    end
  end
  return #due
end

-- Expire up to `bound` leases whose deadline has passed: each counts as a failed attempt.
-- `seed` in [0, 1) spreads the jitter of the retries. Returns the count.
local function reap_expired(now, bound, seed)
  local expired = redis.call('ZRANGEBYSCORE', K_LEASES, '-inf', '(' .. istr(now), 'LIMIT', 0, bound)
  for i = 1, #expired do
    local id = expired[i]
    redis.call('ZREM', K_LEASES, id)
    local t = fields(id, FAIL_FIELDS)
    if indexed_ok(t, LEASED) then
      local r = (seed + i * 0.6180339887498949) % 1
      hincr(K_STATS, 'total:reaped', 1)
      fail_attempt(id, t, now, 'lease expired', true, r, 'expired')
    else
      repaired(1)
    end
  end
  return #expired
end

local TRIM_FIELDS = {'tenant', 'status'}

-- Delete completed and cancelled tasks older than `retention_ms`, at most `bound` of each:
-- the hash and the index entry go together. Returns the count.
local function trim_finished(now, retention_ms, bound)
  local n = 0
  local idx = {{K_COMPLETED, 'completed'}, {K_CANCELLED, 'cancelled'}}
  for j = 1, 2 do
    local key, status = idx[j][1], idx[j][2]
    local old = redis.call('ZRANGEBYSCORE', key, '-inf', istr(now - retention_ms), 'LIMIT', 0, bound)
    for i = 1, #old do
      local id = old[i]
      local t = fields(id, TRIM_FIELDS)
      if t and t.status == status and not tenant_error(t.tenant) then
        hincr(K_STATS, 'n:' .. status, -1)
        hincr(tenant_key(t.tenant), 'n:' .. status, -1)
        redis.call('DEL', task_key(id))
      else
        -- Only the entry goes: a hash that is not this index's task is left for inspection.
        repaired(1)
      end
      redis.call('ZREM', key, id)
      n = n + 1
    end
  end
  return n
end

-- A tenant's rate-limit tokens at `now` (token bucket refilled at rate_per_s, capped at burst),
-- and its rate; nil when the tenant has no rate limit. `th` holds the tenant's hash fields.
-- A clock that stepped back refills nothing (and takes nothing away).
local function bucket_tokens(th, now)
  local rate = num(th.rate_per_s, 0)
  if rate <= 0 then
    return nil, nil
  end
  local burst = num(th.burst, 1)
  local tokens = num(th.tokens, nil)
  local at = num(th.tokens_at, nil)
  if not tokens or not at then
    return burst, rate
  end
  if now > at then
    tokens = tokens + (now - at) * rate / 1000
  end
  if tokens > burst then
    tokens = burst
  end
  return tokens, rate
end

-- Count a completion in the tenant's one-minute windows (fields c_win = window number,
-- c_cur = completions in it, c_prev = in the window before), from which readers estimate the
-- recent throughput with a sliding window: (c_prev x (1 - elapsed fraction) + c_cur) / 60 s.
local function count_completion(tenant, now, n)
  local key = tenant_key(tenant)
  local win = math.floor(now / 60000)
  local f = redis.call('HMGET', key, 'c_win', 'c_cur')
  local cur_win, cur = tonumber(f[1]), num(f[2], 0)
  if cur_win == win then
    hincr(key, 'c_cur', n)
  elseif cur_win == win - 1 then
    redis.call('HSET', key, 'c_win', istr(win), 'c_prev', istr(cur), 'c_cur', istr(n))
  else
    redis.call('HSET', key, 'c_win', istr(win), 'c_prev', '0', 'c_cur', istr(n))
  end
end

-- Count `n` completions of `tenant`'s leased tasks: the queue's total, the status counters
-- (leased -> completed) and the tenant's completion window.
local function count_completed(tenant, now, n)
  count(K_STATS, 'total:completed', n)
  count_completion(tenant, now, n)
  count_status(tenant, 'leased', 'completed', n)
end

-- Score of the earliest entry of a ZSET, or -1 when it is empty.
local function first_score(key)
  local r = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  if #r == 0 then
    return -1
  end
  return tonumber(r[2])
end

-- The lease-holder check shared by heartbeat, complete, fail and release. Reads the task fields
-- `names` (default LEASE_FIELDS; they must include those four).
-- Returns 'ok' and the fields when `token` holds the live lease; 'again' when the same token already ended the
-- lease with `op` (a retried call whose reply was lost); otherwise an error reply to return.
-- With `need_tenant`, a live lease whose task has no tenant, or whose tenant's keys are of
-- another type, is CORRUPT (the transition would update the tenant's counters).
local LEASE_FIELDS = {'status', 'token', 'outcome', 'tenant'}
local function check_lease(id, token, op, need_tenant, names)
  local t, bad = fields(id, names or LEASE_FIELDS)
  if bad then
    return bad
  end
  if not t.status then
    return redis.error_reply('NOTFOUND task ' .. id)
  end
  if t.token ~= token then
    return redis.error_reply('STALE lease token superseded')
  end
  if t.status == 'leased' then
    if need_tenant then
      local e = tenant_error(t.tenant)
      if e then return e end
    end
    return 'ok', t
  end
  -- The lease has ended: how. A completed task's lease ended by its completion (complete
  -- writes no outcome); `names` may leave out the outcome, which is then read here.
  local outcome = t.outcome
  if t.status == 'completed' then
    outcome = 'completed'
  elseif outcome == nil then
    outcome = redis.call('HGET', task_key(id), F.outcome)
  end
  if outcome == 'cancelled' then
    return redis.error_reply('CANCELLED task was cancelled')
  end
  if outcome == op then
    return 'again'
  end
  return redis.error_reply('STALE lease ended (' .. (outcome or '?') .. ')')
end

-- Tenants whose parked-at-cap state `complete_task` has checked in this call.
local unpark_checked = {}

-- The fields `complete_task` reads: the lease check's (its outcome only when the lease has
-- ended) and what the completed event reports (updated_at is when the lease began).
local COMPLETE_FIELDS = {'status', 'token', 'tenant', 'attempt', 'worker', 'updated_at'}

-- Complete task `id` under lease `token` with `result` (leased -> completed): the lease check,
-- then the writes. `per_tenant` (optional, a batch: {ids = {}, tenants = {}, counts = {}}) collects
-- the completions by tenant (tenants in first-seen order, counts by name) for the caller to count
-- with `count_completed` once per tenant, and the completed ids for the caller to move from the
-- leases set to the completed set in one call each; without it both happen here.
-- Returns 'completed', 'again' (the same token completed it before), or an error reply
-- (NOTFOUND, STALE, CANCELLED, CORRUPT; nothing written).
local function complete_task(id, token, result, now, per_tenant)
  local state, t = check_lease(id, token, 'completed', true, COMPLETE_FIELDS)
  if state ~= 'ok' then
    return state
  end
  if per_tenant then
    -- The index moves of a batch are made by the caller, one ZREM and one ZADD per call.
    per_tenant.ids[#per_tenant.ids + 1] = id
  else
    redis.call('ZREM', K_LEASES, id)
    redis.call('ZADD', K_COMPLETED, istr(now), id)
  end
  -- No outcome (a completed task's is 'completed', check_lease knows) and no finished_at (a
  -- completed task's is its updated_at, which nothing changes after this), and lease_exp is
  -- left: it is read only while the task is leased.
  local now_s = istr(now)
  redis.call('HSET', task_key(id), F.result, result, F.updated_at, now_s, F.status, 'completed')
  if per_tenant then
    -- The caller counts the batch's completions once per tenant (`count_completed`).
    local c = per_tenant.counts
    if not c[t.tenant] then
      per_tenant.tenants[#per_tenant.tenants + 1] = t.tenant
      c[t.tenant] = 0
    end
    c[t.tenant] = c[t.tenant] + 1
  else
    count_completed(t.tenant, now, 1)
  end
  -- set_status(id, t.tenant, 'leased', 'completed') without its counters (counted above or by
  -- the caller), with the status written above and the parked check made once per tenant and
  -- call (nothing in this call parks a tenant).
  if not unpark_checked[t.tenant] then
    unpark_checked[t.tenant] = true
    if tonumber(redis.call('ZSCORE', K_PARKED, t.tenant)) == PARKED_CAPPED then
      unpark(t.tenant)
    end
  end
  local run = math.max(0, now - num(t.updated_at, now))
  emit(now, 'completed', id, t.tenant, num(t.attempt, 0), 'w', t.worker or '', 'run_ms', istr(run))
  return 'completed'
end

-- Lease (the `lease` script, and `complete_batch` when it also leases). Most tasks one call
-- leases, and most limited tenants parked (and parked tenants unparked) per call.
local LEASE_MAX = 100
local TENANT_SCAN_MAX = 64
local TENANT_FIELDS = {'weight', 'max_inflight', 'rate_per_s', 'burst', 'tokens', 'tokens_at', 'n:leased',
  'rp'}

-- The lease arguments at ARGV[base + 1 .. base + 6] (the `lease` script's ARGV[1..6], see its
-- header): a table {worker, n, bits, seed, promote_bound, reap_bound}, or nil and an INVALID
-- error reply. Read and checked before a call writes anything.
local function lease_args(base)
  local a = {worker = ARGV[base + 1]}
  local e
  a.n, e = arg_int(ARGV[base + 2], 'n', 1, LEASE_MAX)
  if not a.n then return nil, redis.error_reply(e) end
  a.bits = ARGV[base + 3] or ''
  if not string.match(a.bits, '^[0-9a-f]+$') or string.len(a.bits) > 32 then
    return nil, redis.error_reply('INVALID token bits must be 1..32 lowercase hex digits')
  end
  a.seed, e = arg_num(ARGV[base + 4], 'seed', 0, 1)
  if not a.seed then return nil, redis.error_reply(e) end
  a.promote_bound, e = arg_int(ARGV[base + 5], 'promote bound', 0, 1000)
  if not a.promote_bound then return nil, redis.error_reply(e) end
  a.reap_bound, e = arg_int(ARGV[base + 6], 'reap bound', 0, 1000)
  if not a.reap_bound then return nil, redis.error_reply(e) end
  if not a.worker or a.worker == '' then return nil, redis.error_reply('INVALID worker id is required') end
  if has_separator(a.worker) then
    return nil, redis.error_reply('INVALID worker id must not contain spaces or newlines')
  end
  return a
end

-- The queue keys a lease writes or reads by type (check_keys before the first write).
local LEASE_KEYS = {3, 4, 5, 6, 11, 12, 14, 15, 16}

-- When the task `id` became ready (ms): its last change, or its creation when never changed
-- (`now` when its hash is gone or not a hash: lease drops such an entry).
local function ready_since(id, now)
  local f = redis.pcall('HMGET', task_key(id), F.updated_at, F.created_at)
  if f.err then
    return now
  end
  return num(f[1] or f[2], now)
end

-- Pop up to `k` ids from `tenant`'s ready lists, most urgent first. Strict priority (`step` 0):
-- the lists from priority 9 down, each FIFO. With the queue's aging_step_ms `step` > 0 (the
-- starvation bound): the list heads compared by when each became ready minus priority x step,
-- so a task of priority p counts as if it had arrived p steps earlier (ties: the higher
-- priority). Only the lists the tenant's mask `m` marks are touched, and the exact mask after
-- the pops is stored. A list of another Redis type counts as empty: its bit is cleared and it
-- is counted in `total:repaired` (once: the stored mask skips it afterwards), and the tenant's
-- other lists are served. Returns the ids and whether the tenant has ready work left.
local function pop_ready(tenant, k, step, now, m)
  local out = {}
  local function bad(r)
    return type(r) == 'table' and r.err ~= nil
  end
  m = rp_exact(tenant, m, true)
  if step <= 0 then
    for p = 9, 0, -1 do
      if #out >= k then break end
      if rp_has(m, p) then
        local key = ready_key(tenant, p)
        local want = k - #out
        local got = redis.pcall('LPOP', key, want)
        if bad(got) then
          repaired(1)
          m = m - POW2[p]
        else
          local g = got and #got or 0
          for i = 1, g do
            out[#out + 1] = got[i]
          end
          -- Fewer than asked: the list is empty now. As many: it may hold more.
          if g < want or redis.call('LLEN', key) == 0 then
            m = m - POW2[p]
          end
        end
      end
    end
  else
    -- Aged: the head of each marked list and its score (false: the list is empty).
    local heads = {}
    local function look(p)
      local h = redis.pcall('LRANGE', ready_key(tenant, p), 0, 0)
      if bad(h) then repaired(1) end
      if bad(h) or #h == 0 then
        heads[p] = false
        if rp_has(m, p) then m = m - POW2[p] end
      else
        heads[p] = ready_since(h[1], now) - p * step
      end
    end
    for p = 9, 0, -1 do
      heads[p] = false
      if rp_has(m, p) then look(p) end
    end
    while #out < k do
      local best = nil
      for p = 9, 0, -1 do
        if heads[p] and (best == nil or heads[p] < heads[best]) then
          best = p
        end
      end
      if best == nil then break end
      out[#out + 1] = redis.call('LPOP', ready_key(tenant, best))
      look(best)
    end
  end
  rp_store(tenant, m)
  return out, m > 0
end

-- Lease up to a.n ready tasks (a from `lease_args`) at `now`, as the `lease` script's header
-- says: promote due tasks, record the worker, reap expired leases, unpark due tenants, then
-- serve tenants by fair share. Returns the reply's {task, ...} and next_ms.
local function lease_tasks(a, now)
  local worker, n, bits = a.worker, a.n, a.bits
  defer_events()
  if a.promote_bound > 0 then promote_due(now, a.promote_bound) end
  note_worker(worker, now)
  if a.reap_bound > 0 then reap_expired(now, a.reap_bound, a.seed) end

  local out = {}
  local paused = redis.call('HGET', K_CONFIG, 'paused') == '1'
  local step = aging_step()
  unpark_due(now, TENANT_SCAN_MAX)
  -- Status counters and `served` are added once at the end; the tenant's live leases are read
  -- from its hash plus the leases this call made (tenant -> count). Counts still deferred by the
  -- caller (complete_batch) or by the promotions and reaps above are written first, so the
  -- hash holds them (a reaped lease no longer counts against its tenant's cap).
  flush_counts()
  defer_counts()
  local leased_now = {}
  local lease_scores = {}
  local now_s = istr(now)
  -- Tenants whose keys this call has checked (tenant -> true).
  local tenant_ok = {}
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
      -- The hash's type; a ready list of another type is found by the pops (pop_ready).
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
      -- The mask as this call last stored it, or as read with the tenant's fields.
      if tenant_rps[tenant] == nil then tenant_rps[tenant] = rp_parse(th.rp) end
      local popped, left = pop_ready(tenant, k, step, now, tenant_rps[tenant])
      if #popped == 0 and not left then
        redis.call('ZREM', K_TENANTS, tenant)
      else
        local last_vt = vt
        for j = 2, #popped do
          last_vt = last_vt + 1 / weight
          vt = last_vt
        end
        redis.call('HSET', K_STATS, 'vtime', fstr(last_vt))
        if not left then
          redis.call('ZREM', K_TENANTS, tenant)
        else
          redis.call('ZADD', K_TENANTS, fstr(last_vt + 1 / weight), tenant)
        end
        local served = 0
        for j = 1, #popped do
          local id = popped[j]
          local key = task_key(id)
          -- One HGETALL gives the fields the lease needs and the reply (the record as it was; the
          -- caller applies what the HSET below writes, from the epoch and attempt in the reply).
          local flat = redis.pcall('HGETALL', key)
          -- Stored field name (F) -> index of its value in flat. The constructor sizes the table
          -- for a record's usual fields (the nils reserve their slots), sparing the rehashes of a
          -- growing one.
          local at = {t = nil, y = nil, p = nil, c = nil, s = nil, pr = nil, a = nil, e = nil}
          if flat.err then
            flat = nil
          else
            for j2 = 1, #flat, 2 do
              at[flat[j2]] = j2 + 1
            end
          end
          -- A queued task stores no status (F).
          local status = flat and (at.s and flat[at.s] or (at.c and 'queued'))
          if status == 'queued' then
            served = served + 1
            local epoch = next_count(key, F.epoch, at.e and flat[at.e])
            local attempt = next_count(key, F.attempt, at.a and flat[at.a])
            local lease_ms = num(at.l and flat[at.l], LEASE_MS_DEFAULT)
            if lease_ms < FACTS.lease_ms_min or lease_ms > FACTS.lease_ms_max then
              lease_ms = LEASE_MS_DEFAULT
            end
            local exp = now + math.floor(lease_ms)
            -- When the task became ready: its last change, or its creation when never changed.
            local updated_at = (at.u and flat[at.u]) or flat[at.c]
            -- epoch and attempt first: where they are missing, HINCRBY would have added them first.
            local epoch_s, exp_s = istr(epoch), istr(exp)
            -- No leased_at (updated_at is when the lease began, as long as it is held) and no
            -- outcome (it is read only once a lease has ended, and every end writes its own).
            redis.call('HSET', key, F.epoch, epoch_s, F.attempt, istr(attempt), F.token, epoch_s .. '-' .. bits,
              F.worker, worker, F.lease_exp, exp_s, F.updated_at, now_s, F.status, 'leased')
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
  return out, next_ms
end
