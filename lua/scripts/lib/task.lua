-- lib/task.lua: the task hash. Provides fields (read named fields with their defaults),
-- task_view (a task as replies show it), priority_of, add_history (the attempt history),
-- TASK_DEFAULTS, POLICY and POLICY_DEFAULTS (the retry-policy settings and their defaults as
-- numbers), LEASE_MS_DEFAULT and ERROR_MAX (the longest stored message).
-- Needs: format, keys
-- Per-call state: c.stored_args (the HMGET arguments of each names table read).

local ERROR_MAX, add_history, priority_of, TASK_DEFAULTS, POLICY, POLICY_DEFAULTS, LEASE_MS_DEFAULT, fields, task_view
do
  -- Longest a stored error message or history line may be (bytes).
  ERROR_MAX = 2048
  -- Attempt history lines kept on a task (older lines are dropped).
  local HISTORY_MAX = 20

  -- The stored names of a task hash's fields (docs/design-notes.md, note 26): a field's name is
  -- stored in every task hash, so the short names save memory on every queued task (Redis keeps a
  -- small hash as a listpack of its names and values). Scripts name fields by their long (logical)
  -- names, as replies and the API do, and map them with `F` (name -> stored name) at each read and
  -- write of a task hash; the Rust side maps them back (orq::task::stored_name, decode::task). `F`
  -- is declared by the line before the lib files, generated from the one list in lua/src/fields.rs. A
  -- queued task stores no status: an absent `s` in a hash that has `c` (created_at, which every
  -- record has) reads as 'queued'.

  -- Append a line to the task's attempt history, keeping the last HISTORY_MAX lines.
  function add_history(c, id, line)
    local key = task_key(c, id)
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

  -- A task's priority from its stored field: 0..9 (garbage reads as 0).
  function priority_of(v)
    local p = num(v, 0)
    if p < 0 or p > 9 or p ~= math.floor(p) then
      return 0
    end
    return p
  end

  -- The compact task record. A task hash stores only what differs from these values, which every
  -- reader fills in for an absent field: enqueue omits them, so a task submitted with the default
  -- retry policy stores none of them (written once, in orq_lua::facts::task_defaults; the
  -- conformance test `a_default_task_stores_only_what_differs_from_the_defaults` checks both).
  -- `id` and `queue` are not stored either: the key names both (`task_view` adds the id to replies,
  -- the client knows the queue), and an absent `updated_at` or `run_at` is `created_at`.
  TASK_DEFAULTS = FACTS.task_defaults
  -- The retry-policy settings (logical names, F maps them; in the order enqueue stores them) and
  -- their TASK_DEFAULTS as numbers (generated with them, orq_lua::facts::POLICY).
  POLICY = FACTS.policy
  POLICY_DEFAULTS = FACTS.policy_defaults
  -- A task's lease length when its own is absent or not a valid one (ms).
  -- (A number in FACTS: a library's top level may call no function, not even tonumber.)
  LEASE_MS_DEFAULT = FACTS.lease_ms_default

  -- c.stored_args: names table -> its HMGET arguments (the stored names, then 'c'), memoised for
  -- the call; callers that read in a loop pass the same table each time.
  -- Read the named fields (long names) of a task hash into a Lua table keyed by those names
  -- (absent fields read as their TASK_DEFAULTS value, or false; an absent status of a record that
  -- has `c` reads as 'queued'). When the key holds another Redis type, returns nil and a CORRUPT
  -- error reply instead; a missing hash reads as absent fields (callers test `status`).
  function fields(c, id, names)
    local key = task_key(c, id)
    local args = c.stored_args[names]
    if not args then
      args = {}
      for i = 1, #names do
        args[i] = F[names[i]] or error('fields: ' .. names[i] .. ' is no task field')
      end
      args[#names + 1] = 'c'
      c.stored_args[names] = args
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
  function task_view(c, id)
    local key = task_key(c, id)
    local flat = redis.call('HGETALL', key)
    if #flat > 0 then
      flat[#flat + 1] = 'id'
      flat[#flat + 1] = id
    end
    return flat
  end
end
