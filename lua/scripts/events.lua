-- events: read a queue's event stream after a given entry (for dashboards and SSE feeds).
--
-- Transition: none (a read; a script so that the simulator covers it).
--
-- KEYS: the queue key set (lib.lua); this script uses
--   KEYS[12] orq:{q}:events  STREAM one entry per call holding its events (lib.lua, `emit`):
--                            fields ts, then per event k, id, t, a and kind-specific pairs
--
-- ARGV:
--   ARGV[1]  string   after: an event ID `<n>-<seq>` (a stream ID); events strictly after it are
--                     returned; '' = from the oldest event still held
--   ARGV[2]  integer  count: most events returned (1..1000)
--
-- Returns: {now_ms, {{event_id, {field, value, ...}}, ...}} oldest first, one item per event in
--   XRANGE's shape: fields k, ts, id, t, a, then the kind's pairs. An entry holding m events with
--   the ID `<n>-0` gives the events `<n-m+1>-0` .. `<n>-0`; an entry of the older one-event
--   format (k first) gives itself under its own ID.
-- Errors: INVALID (bad after id or count); CORRUPT (the events key holds another Redis type).
-- Emits: nothing.

local now = now_ms()
local bad = check_keys({12})
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
-- Events numbered at or below this are not after the cursor (an ID `<n>-<seq>` of a packed entry's
-- event always has seq 0, so it is after `<a>-<s>` exactly when n > a).
local after_no = -1
if after ~= '' then
  after_no = tonumber(string.match(after, '^(%d+)'))
end

-- Entries are read a page at a time: each holds at least one event.
local PAGE = 32
local out = {}
while #out < count do
  local entries = redis.call('XRANGE', K_EVENTS, start, '+', 'COUNT', PAGE)
  for i = 1, #entries do
    local sid, f = entries[i][1], entries[i][2]
    if f[1] == 'ts' then
      -- Where each event's fields start (at its `k`).
      local starts = {}
      for j = 3, #f, 2 do
        if f[j] == 'k' then starts[#starts + 1] = j end
      end
      local m = #starts
      local last_no = tonumber(string.match(sid, '^(%d+)'))
      for j = 1, m do
        local no = last_no - m + j
        if no > after_no then
          local ev = {'k', f[starts[j] + 1], 'ts', f[2]}
          local stop = (starts[j + 1] or #f + 1) - 1
          for x = starts[j] + 2, stop do
            ev[#ev + 1] = f[x]
          end
          out[#out + 1] = {istr(no) .. '-0', ev}
          if #out >= count then break end
        end
      end
    else
      out[#out + 1] = entries[i]
    end
    if #out >= count then break end
  end
  if #entries < PAGE then break end
  start = '(' .. entries[#entries][1]
end
return {now, out}
