-- workers: the workers a queue has seen and the leases they hold.
--
-- Transition: none (a read).
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:    prefix of HASH orq:{q}:task:<id>
--   KEYS[5]  orq:{q}:leases   ZSET leased tasks, score=lease deadline ms
--   KEYS[16] orq:{q}:workers  ZSET workers seen by lease or heartbeat, score=last call ms
--
-- ARGV:
--   ARGV[1]  integer  most workers reported (1..10000), most recently seen first
--   ARGV[2]  integer  most leases reported (0..10000), earliest deadline first
--
-- Returns: {now_ms, {{worker, last_seen_ms}, ...}, {lease, ...}, leases_total}
--   lease: {task_id, worker, type, tenant, leased_at_ms, lease_exp_ms, hb_at_ms}; hb_at_ms is the
--   last heartbeat, or leased_at_ms when none came yet.
-- Errors: INVALID; CORRUPT <key> (the leases or workers key holds another Redis type). Leases
--   whose task hash is missing or of another type are skipped.
-- Emits: nothing.
--
-- Uses: ctx, format, args, keys, task

local c = new_ctx(KEYS)

local now = now_ms()
local bad = check_keys(c, {5, 16})
if bad then return bad end
local max_workers, e = arg_int(ARGV[1], 'workers', 1, 10000)
if not max_workers then return redis.error_reply(e) end
local max_leases
max_leases, e = arg_int(ARGV[2], 'leases', 0, 10000)
if not max_leases then return redis.error_reply(e) end
local seen = redis.call('ZREVRANGE', c.K_WORKERS, 0, max_workers - 1, 'WITHSCORES')
local workers = {}
for i = 1, #seen, 2 do
  workers[#workers + 1] = {seen[i], tonumber(seen[i + 1])}
end
local leases = {}
if max_leases > 0 then
  local ids = redis.call('ZRANGE', c.K_LEASES, 0, max_leases - 1)
  local names = {'worker', 'type', 'tenant', 'updated_at', 'lease_exp', 'hb_at'}
  for i = 1, #ids do
    -- While a task is leased its updated_at is when the lease began (lease.lua).
    local t = fields(c, ids[i], names) or {}
    if t.tenant then
      local leased_at = num(t.updated_at, 0)
      -- hb_at may be left from an earlier lease of the task: only a later one counts.
      local hb = num(t.hb_at, nil)
      if not hb or hb < leased_at then hb = leased_at end
      leases[#leases + 1] = {ids[i], t.worker or '', t.type or '', t.tenant, leased_at,
        num(t.lease_exp, 0), hb}
    end
  end
end
return {now, workers, leases, redis.call('ZCARD', c.K_LEASES)}
