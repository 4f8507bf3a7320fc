-- events: read a queue's event stream after a given entry (for dashboards and SSE feeds).
--
-- Transition: none (a read; a script so that the simulator covers it).
--
-- KEYS: the queue key set (lib.lua); this script uses
--   KEYS[12] orq:{q}:events  STREAM one entry per transition (fields k, ts, id, t, a, then
--                            kind-specific pairs)
--
-- ARGV:
--   ARGV[1]  string   after: a stream id `<ms>-<seq>`; entries strictly after it are returned;
--                     '' = from the oldest entry still held
--   ARGV[2]  integer  count: most entries returned (1..1000)
--
-- Returns: {now_ms, {{stream_id, {field, value, ...}}, ...}} oldest first (XRANGE's shape).
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
return {now, redis.call('XRANGE', K_EVENTS, start, '+', 'COUNT', count)}
