-- events: read a queue's event stream after a given event (for dashboards and SSE feeds).
--
-- Transition: none (a read; a script so that the simulator covers it).
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[12] orq:{q}:events  STREAM the events of each call (lib/events.lua: an entry of plain fields
--                            ts, k, id, t, a, ..., or a batch: fields ts and e)
--
-- ARGV:
--   ARGV[1]  string   after: an event id `<ms>-<n>`; the entries that hold events after it are
--                     returned; '' = from the oldest entry still held
--   ARGV[2]  integer  count: events wanted (1..1000)
--
-- Returns: {now_ms, {{stream_id, {field, value, ...}}, ...}} oldest first (XRANGE's shape): the
--   entries after `after`, and the one that holds its next event, until they hold `count`
--   events after `after` (batch entries may hold more, up to 100 each) or the stream ends. The
--   reader (`orq::decode::stream_events`) names the events and drops those up to `after`.
-- Errors: INVALID (bad after id or count); CORRUPT (the events key holds another Redis type).
-- Emits: nothing.
--
-- Uses: ctx, format, args, keys

local c = new_ctx(KEYS)

local now = now_ms()
local bad = check_keys(c, {12})
if bad then return bad end
local after = ARGV[1] or ''
-- The largest unsigned 64-bit integer, the largest part of a stream id.
local U64_MAX = '18446744073709551615'

-- The digits `d` without leading zeros when they are an unsigned 64-bit integer, else nil.
local function u64_text(d)
  d = string.gsub(d, '^0+(%d)', '%1')
  if string.len(d) < 20 or (string.len(d) == 20 and d <= U64_MAX) then
    return d
  end
  return nil
end

local count, e = arg_int(ARGV[2], 'count', 1, 1000)
if not count then return redis.error_reply(e) end
local start = '-'
if after ~= '' then
  local ms, seq = string.match(after, '^(%d+)%-(%d+)$')
  if ms then
    ms, seq = u64_text(ms), u64_text(seq)
  end
  if not ms or not seq or string.len(after) > 41 then
    return redis.error_reply('INVALID after must be a stream id <ms>-<seq>')
  end
  -- Nothing comes after the largest stream id (and Redis refuses it as an exclusive start).
  if ms == U64_MAX and seq == U64_MAX then
    return {now, {}}
  end
  start = '(' .. after
end
-- An entry `<ms>-<n>` of m events holds events `<ms>-<n - m + 1>` .. `<ms>-<n>` (lib/events.lua), so
-- the first entry after `after` holds its next event. Fetched in chunks until the entries hold
-- `count` events after `after` (a plain entry holds one, a batch entry one per
-- ' \n '-separated part of its `e`), or the stream ends.
local after_ms, after_n = nil, nil
if after ~= '' then
  local a, b = string.match(after, '^(%d+)%-(%d+)$')
  after_ms, after_n = tonumber(a), tonumber(b)
end
local out = {}
local events = 0
while events < count do
  local want = count - events
  local chunk = redis.call('XRANGE', c.K_EVENTS, start, '+', 'COUNT', istr(want))
  for i = 1, #chunk do
    local fields = chunk[i][2]
    local m = 0
    for j = 1, #fields - 1, 2 do
      if fields[j] == 'k' then
        m = m + 1
      elseif fields[j] == 'e' then
        local _, seps = string.gsub(fields[j + 1], ' \n ', '')
        m = m + 1 + seps
      end
    end
    -- The entry that holds `after` itself: only its events after it count.
    local ms, n = string.match(chunk[i][1], '^(%d+)%-(%d+)$')
    if after_ms and tonumber(ms) == after_ms and tonumber(n) - after_n < m then
      m = tonumber(n) - after_n
    end
    events = events + m
    out[#out + 1] = chunk[i]
    if events >= count then break end
  end
  if #chunk < want or events >= count then break end
  start = '(' .. chunk[#chunk][1]
end
return {now, out}