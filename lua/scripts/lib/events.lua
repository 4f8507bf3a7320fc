-- lib/events.lua: the queue's event stream (KEYS[12]). Provides emit (record one event),
-- defer_events and flush_events (a batch call writes its events as few entries at its end),
-- events_read (the last event's id as the caller read it) and has_separator (whether a value
-- would break a batch entry).
-- Needs: format, counters
-- Per-call state: the pending batch (c.ev_buf, false unless the call defers its events;
-- c.ev_len, c.ev_count, c.ev_now), the entries written (c.ev_last_ms, c.ev_last_n, c.ev_entries,
-- and c.ev_first_n, the number of the first event written since the last trim check)
-- and the stats hash's `events` field when the caller read it (c.ev_read). Kept across
-- calls: repeated_has_separator's memo (pure, bounded by format.lua's MEMO_MAX).

local has_separator, defer_events, emit, flush_events, events_read
do
  -- Events the event stream keeps at least. Trimmed when a call's events reach a multiple of
  -- TRIM_STEP (so a queue pays the trim's reads once per TRIM_STEP events, not on every call:
  -- it cost a single-task enqueue about 138,000 Redis instructions, a third of the call), whole
  -- entries at a time, so it holds fewer than EVENTS_MAX + TRIM_STEP + EVENTS_PER_ENTRY + the
  -- events of one call; trimmed exactly (XTRIM MINID) so the simulator can model it.
  local EVENTS_MAX = 10000
  local TRIM_STEP = 100

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
  function has_separator(s)
    return string.find(s, ' ', 1, true) ~= nil or string.find(s, '\n', 1, true) ~= nil
  end

  -- `has_separator`, memoised (pure, bounded: MEMO_MAX) for the values calls repeat
  -- (worker ids and tenants read from task hashes that damage may have written with a space).
  local separator_memo, separator_n = {}, 0
  local function repeated_has_separator(s)
    local r = separator_memo[s]
    if r == nil then
      r = has_separator(s)
      if separator_n >= MEMO_MAX then separator_memo, separator_n = {}, 0 end
      separator_memo[s] = r
      separator_n = separator_n + 1
    end
    return r
  end

  -- Per call, in the context: whether the call writes its events once at its end (c.ev_buf is
  -- a table: a batch script calls `defer_events` first and `flush_events` before it returns) or
  -- with every `emit` (c.ev_buf is false); the pending batch: its lines' pieces (c.ev_buf,
  -- c.ev_len of them; table.concat joins them with spaces, a '\n' piece ends a line), how many events
  -- they hold (c.ev_count), and the call time they share (c.ev_now); the id (as two numbers) of
  -- the last event the call wrote (c.ev_last_ms, c.ev_last_n), and the entries it wrote
  -- (c.ev_entries).

  -- A stream ID `<ms>-<seq>` as two numbers, or nil.
  local function parse_stream_id(s)
    if type(s) ~= 'string' then return nil end
    local a, b = string.match(s, '^(%d+)%-(%d+)$')
    if not a then return nil end
    return tonumber(a), tonumber(b)
  end

  -- Write an entry of `m` events whose fields after `ts` are `fields`, at `now`.
  local function write_events(c, now, m, fields)
    if m == 0 then return end
    local lt, ln = c.ev_last_ms, c.ev_last_n
    if not lt then
      local rec = c.ev_read
      if rec == nil then rec = redis.call('HGET', c.K_STATS, 'events') end
      lt, ln = parse_stream_id(rec)
      if not lt then
        -- No record (a new queue, a lost stats hash): go on from the stream's last id, if any.
        if rec then repaired(c, 1) end
        local top = redis.call('XREVRANGE', c.K_EVENTS, '+', '-', 'COUNT', '1')
        if top[1] then lt, ln = parse_stream_id(top[1][1]) end
        lt, ln = lt or 0, ln or 0
      end
    end
    local t, n = math.max(now, lt), ln + m
    local ts = istr(now)
    local id = redis.pcall('XADD', c.K_EVENTS, istr(t) .. '-' .. istr(n), 'ts', ts, unpack(fields))
    if type(id) == 'table' and id.err then
      -- The stream holds a later id than the record (a stale stats hash, a stream restored
      -- without its stats hash): go on after it. A stream whose last id outlived its entries
      -- starts again.
      local top = redis.call('XREVRANGE', c.K_EVENTS, '+', '-', 'COUNT', '1')
      local tt, tn = parse_stream_id(top[1] and top[1][1])
      if tt and tt < FACTS.exact_int_max and tn < FACTS.exact_int_max - 2 * EVENTS_PER_ENTRY then
        t, n = tt + 1, tn + m
      else
        redis.call('DEL', c.K_EVENTS)
        t, n = now, m
      end
      repaired(c, 1)
      redis.call('XADD', c.K_EVENTS, istr(t) .. '-' .. istr(n), 'ts', ts, unpack(fields))
    end
    c.ev_last_ms, c.ev_last_n = t, n
    if c.ev_entries == 0 then c.ev_first_n = n - m + 1 end
    c.ev_entries = c.ev_entries + 1
  end

  -- After a call's writes: record the last event's id in the stats hash; and when the events
  -- written since the last finish (numbers c.ev_first_n .. n) reach a multiple of TRIM_STEP (or
  -- the numbering went back), drop the oldest entries while the newest EVENTS_MAX events are all
  -- after them (an entry whose number is above the last one's was numbered before the counter
  -- was reset, so it is old too). Reads as many of the oldest entries as this call wrote, plus
  -- one; while every entry read goes, twice as many after the last one read (an exclusive range:
  -- an entry is read once; re-reading from the start cost ~5,000 Redis instructions per
  -- completed task, the entries being whole batches of events), at most eight reads a call (up
  -- to ~255 × that many entries: old entries of one event each go as fast as new ones of a
  -- hundred come), then one XTRIM MINID (the first entry kept; no XLEN).
  local function finish_events(c)
    if c.ev_entries == 0 then return end
    local n = c.ev_last_n
    redis.call('HSET', c.K_STATS, 'events', istr(c.ev_last_ms) .. '-' .. istr(n))
    local first = c.ev_first_n
    local due = first > n or math.floor((first - 1) / TRIM_STEP) ~= math.floor(n / TRIM_STEP)
    if n > EVENTS_MAX and due then
      local want = c.ev_entries + 1
      local start = '-'
      -- The last entry read that goes (nil: none), and the first that stays (nil: none read).
      local last_gone, min_id = nil, nil
      for _ = 1, 8 do
        local old = redis.call('XRANGE', c.K_EVENTS, start, '+', 'COUNT', istr(want))
        for i = 1, #old do
          local _, on = parse_stream_id(old[i][1])
          if on and on > n then on = 0 end
          if on and on <= n - EVENTS_MAX then
            last_gone = old[i][1]
          else
            min_id = old[i][1]
            break
          end
        end
        if min_id or #old < want then break end
        start = '(' .. last_gone
        want = want * 2
      end
      if last_gone then
        if not min_id then
          -- Every entry read goes: keep from just after the last of them.
          local lt, ls = parse_stream_id(last_gone)
          min_id = istr(lt) .. '-' .. istr(ls + 1)
        end
        redis.call('XTRIM', c.K_EVENTS, 'MINID', min_id)
      end
    end
    c.ev_entries = 0
  end

  -- Write the pending batch as one entry (nothing when there is none).
  local function write_batch(c)
    if c.ev_count == 0 then return end
    -- The last piece is the last line's '\n', left out.
    write_events(c, c.ev_now, c.ev_count, {'e', table.concat(c.ev_buf, ' ', 1, c.ev_len - 1)})
    c.ev_len = 0
    c.ev_count = 0
  end

  -- The stats hash's `events` field (the last event's id) as the caller read it, false when
  -- absent, before this call wrote any event: the first entry it writes needs no read of its own.
  function events_read(c, rec)
    c.ev_read = rec
  end

  -- Write this call's events once, at its end (see `flush_events`); a second call changes nothing.
  function defer_events(c)
    if not c.ev_buf then c.ev_buf = {} end
  end

  -- Record one event for the queue's stream: `k1, v1, k2, v2, k3, v3` are up to three extra
  -- name/value pairs (strings; a nil name ends them). Written at once as a plain entry, or
  -- (deferred) by `flush_events` as lines of a batch entry.
  function emit(c, now, kind, id, tenant, attempt, k1, v1, k2, v2, k3, v3)
    local a = istr(attempt)
    -- The context's fields are read once each and written once each (a field of the context
    -- costs Redis about 60 instructions more than a local; this runs once per event).
    local b = c.ev_buf
    if not b or ((kind == 'retrying' or kind == 'dead')
        and has_separator(table.concat({v1 or '', v2 or '', v3 or ''})))
        or (kind == 'completed' and (repeated_has_separator(v1) or repeated_has_separator(tenant))) then
      write_batch(c)
      write_events(c, now, 1, {'k', kind, 'id', id, 't', tenant, 'a', a, k1, v1, k2, v2, k3, v3})
      if not b then finish_events(c) end
      return
    end
    local n = c.ev_count
    if n == 0 then
      c.ev_now = now
    elseif c.ev_now ~= now then
      write_batch(c)
      n = 0
      c.ev_now = now
    end
    local i = c.ev_len
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
    c.ev_len = i + 1
    n = n + 1
    c.ev_count = n
    if n >= EVENTS_PER_ENTRY then
      write_batch(c)
    end
  end

  -- Write the events this call deferred (nothing when there are none), then record and trim.
  function flush_events(c)
    write_batch(c)
    finish_events(c)
  end
end
