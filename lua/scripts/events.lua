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
-- Errors: INVALID (bad after id or count).
-- Emits: nothing.

local now = now_ms()
local after = ARGV[1] or ''
local count, e = arg_int(ARGV[2], 'count', 1, 1000)
if not count then return redis.error_reply(e) end
local start = '-'
if after ~= '' then
  if not string.match(after, '^%d+%-%d+$') or string.len(after) > 41 then
    return redis.error_reply('INVALID after must be a stream id <ms>-<seq>')
  end
  start = '(' .. after
end
return {now, redis.call('XRANGE', K_EVENTS, start, '+', 'COUNT', count)}
