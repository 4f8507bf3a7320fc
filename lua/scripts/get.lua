-- get: read one task.
--
-- Transition: none (a read; a script so that the simulator covers it).
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:  prefix of HASH orq:{q}:task:<id>
--
-- ARGV:
--   ARGV[1]  string  task id
--
-- Returns: {now_ms, fields} where fields is the task as `task_view` gives it (lib/task.lua: the hash,
--   flat, then id), empty when not found.
-- Errors: INVALID (no id); CORRUPT (the task key holds another Redis type than a hash).
-- Emits: nothing.
--
-- Uses: ctx, format, args, keys, task

local c = new_ctx(KEYS)

local missing = require_args(ARGV, {'id'})
if missing then return missing end
local bad = check_keys(c, {})
if bad then return bad end
local t
t, bad = fields(c, ARGV[1], {'status'})
if bad then return bad end
return {now_ms(), task_view(c, ARGV[1])}
