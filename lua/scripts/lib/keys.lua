-- lib/keys.lua: the queue key set and its checks. Provides check_keys (the call's KEYS are the
-- 16 queue keys, each of orq's Redis type), key_type and type_error, the keys of one task, ready
-- list or tenant (task_key, ready_key, tenant_key), and tenant_error / tenant_read / list_error (a
-- tenant's own keys are of orq's types, the hash's fields read by the check). The keys themselves are the context's K_* fields (ctx.lua).
-- Needs: format
-- Per-call state: c.tenant_errors, c.list_errors (the type checks made, key -> reply or false),
-- c.tenant_reads (tenant -> the hash fields its check read; false until the first). Kept across
-- calls: check_keys' memo of key sets found distinct (pure, bounded by format.lua's MEMO_MAX).
--
-- The queue key set. Every script is called with the same KEYS, built by one Rust function
-- (`orq::keys::QueueKeys`), all sharing the queue's hash tag `{q}` so one script touches one
-- Redis Cluster slot. Three entries are key prefixes rather than keys: the task hash, the ready
-- lists and the tenant hash of an id or tenant the script finds inside an index (DESIGN.md, Redis
-- keys; docs/design-notes.md, note 25).
--   KEYS[1]  orq:{q}:task:           prefix of HASH orq:{q}:task:<id>, the task's fields in their
--                                    stored names (F, task.lua; no status while queued)
--   KEYS[2]  orq:{q}:ready:          prefix of LIST orq:{q}:ready:<p>:<tenant>, the ids of the
--                                    tenant's queued tasks of priority p (0..9), oldest first
--   KEYS[3]  orq:{q}:tenants         ZSET tenants with ready work, score=virtual time
--   KEYS[4]  orq:{q}:scheduled       ZSET scheduled and retrying tasks, score=run_at ms
--   KEYS[5]  orq:{q}:leases          ZSET leased tasks, score=lease deadline ms
--   KEYS[6]  orq:{q}:dead            ZSET dead tasks, score=time of death ms
--   KEYS[7]  orq:{q}:completed       ZSET completed tasks, score=finish time ms
--   KEYS[8]  orq:{q}:cancelled       ZSET cancelled tasks, score=cancel time ms
--   KEYS[9]  orq:{q}:idem:           prefix of STRING orq:{q}:idem:<tenant>:<key> = task id, TTL
--   KEYS[10] orq:{q}:tenant:         prefix of HASH orq:{q}:tenant:<tenant> (weight, limits, counters
--                                    n:<status> except queued, which its ready lists' entries are;
--                                    rp: the ready-list mask, a bit per priority whose list holds ids)
--   KEYS[11] orq:{q}:stats           HASH queue counters (n:<status>, total:<event>, vtime, events,
--                                    capped: the tenants with a max_queued, lib/capped.lua)
--   KEYS[12] orq:{q}:events          STREAM the events of each call, numbered, >= EVENTS_MAX kept
--   KEYS[13] orq:{q}:known_tenants   ZSET every tenant that ever submitted, score=0 (name order)
--   KEYS[14] orq:{q}:config          HASH queue settings: paused (0|1), aging_step_ms
--   KEYS[15] orq:{q}:parked          ZSET tenants with ready work held back by a limit, score=ms
--                                    when eligible again (PARKED_CAPPED: when one of its leases ends)
--   KEYS[16] orq:{q}:workers         ZSET workers seen by lease or heartbeat, score=last call ms
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

local key_type, type_error, check_keys, task_key, ready_key, tenant_key, tenant_error, tenant_read, list_error
do
  -- The Redis type each queue key holds (the prefixes KEYS[1], KEYS[2], KEYS[9] and KEYS[10] are
  -- checked per key, by the scripts that append to them).
  local KEY_TYPES = {[3] = 'zset', [4] = 'zset', [5] = 'zset', [6] = 'zset', [7] = 'zset',
    [8] = 'zset', [11] = 'hash', [12] = 'stream', [13] = 'zset', [14] = 'hash', [15] = 'zset',
    [16] = 'zset'}

  -- The Redis type of `key` ('none' when it does not exist).
  function key_type(key)
    return redis.call('TYPE', key)['ok']
  end

  -- A CORRUPT error reply when `key` exists with another type than `want`, else nil.
  function type_error(key, want)
    local t = key_type(key)
    if t ~= 'none' and t ~= want then
      return redis.error_reply('CORRUPT ' .. key .. ' holds a ' .. t .. ', not a ' .. want)
    end
    return nil
  end

  -- Key sets found distinct, by their first key (a bounded pure memo kept across calls, as
  -- format.lua's: a queue's calls pass the same sixteen keys, and building the table of seen
  -- names cost Redis about 16,000 instructions a call, comparing them with the memo's 5,000).
  local distinct_memo, distinct_n = {}, 0

  -- Whether the sixteen keys `K` are a set found distinct before (equal strings, compared
  -- unrolled: a loop costs more than the comparisons).
  local function known_distinct(K)
    local m = distinct_memo[K[1]]
    return m ~= nil and K[2] == m[2] and K[3] == m[3] and K[4] == m[4] and K[5] == m[5]
      and K[6] == m[6] and K[7] == m[7] and K[8] == m[8] and K[9] == m[9] and K[10] == m[10]
      and K[11] == m[11] and K[12] == m[12] and K[13] == m[13] and K[14] == m[14]
      and K[15] == m[15] and K[16] == m[16]
  end

  -- Check the queue key set before the first write: exactly the 16 queue keys, all distinct (INVALID
  -- otherwise), and each KEYS[i] for i in `idx` absent or of orq's type (CORRUPT otherwise).
  -- Returns the error reply, or nil when all is well.
  function check_keys(c, idx)
    if #c.KEYS ~= 16 then
      return redis.error_reply('INVALID expected the 16 queue keys, got ' .. #c.KEYS)
    end
    -- Sixteen distinct names: two KEYS naming one key would let one write change the type of a
    -- key another part of the script checked (a ZADD to `cancelled` then an HINCRBY to `stats`).
    local K = c.KEYS
    if not known_distinct(K) then
      local seen = {}
      for i = 1, 16 do
        local k = K[i]
        if seen[k] then
          return redis.error_reply('INVALID KEYS[' .. seen[k] .. '] and KEYS[' .. i .. '] name one key')
        end
        seen[k] = i
      end
      if distinct_n >= MEMO_MAX then distinct_memo, distinct_n = {}, 0 end
      distinct_memo[K[1]] = {unpack(K, 1, 16)}
      distinct_n = distinct_n + 1
    end
    for i = 1, #idx do
      local bad = type_error(c.KEYS[idx[i]], KEY_TYPES[idx[i]])
      if bad then return bad end
    end
    return nil
  end

  function task_key(c, id)
    return c.K_TASK .. id
  end

  -- The priorities as text (a number in a concatenation is printed by sprintf: ~2,000 Redis
  -- instructions; a priority parsed from '-0' is -0, which indexes the same entry as 0).
  local PRIORITY_TEXT = {[0] = '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'}

  -- The ready list of `tenant`'s queued tasks of priority `p` (0..9).
  function ready_key(c, tenant, p)
    return c.K_READY .. (PRIORITY_TEXT[p] or p + 0) .. ':' .. tenant
  end

  function tenant_key(c, tenant)
    return c.K_TENANT .. tenant
  end

  -- Checked once per call (c.tenant_errors, c.list_errors: key -> CORRUPT reply or false): a
  -- script writes only orq's types, so the answer cannot change within a call.
  -- A CORRUPT error reply when the ready list of (`tenant`, `p`) holds another Redis type; else nil.
  function list_error(c, tenant, p)
    local key = ready_key(c, tenant, p)
    local known = c.list_errors[key]
    if known == nil then
      known = type_error(key, 'list') or false
      c.list_errors[key] = known
    end
    return known or nil
  end

  -- A CORRUPT error reply when one of the tenant's own keys holds another Redis type than orq's,
  -- or the tenant name is missing; else nil. The keys: its hash, and its ready list of priority
  -- `p` (none when `p` is nil: the caller writes no ready list). With `names` (a table of the
  -- hash's fields), the first check of the tenant in the call reads them instead of asking the
  -- hash's type (an HMGET of another type fails): `tenant_read` then gives their values.
  function tenant_error(c, tenant, p, names)
    if not tenant or tenant == '' then
      return redis.error_reply('CORRUPT task has no tenant')
    end
    local known = c.tenant_errors[tenant]
    if known == nil then
      local key = tenant_key(c, tenant)
      if names then
        local vals = redis.pcall('HMGET', key, unpack(names))
        if vals.err then
          known = type_error(key, 'hash') or redis.error_reply(vals.err)
        else
          known = false
          if not c.tenant_reads then c.tenant_reads = {} end
          c.tenant_reads[tenant] = vals
        end
      else
        known = type_error(key, 'hash') or false
      end
      c.tenant_errors[tenant] = known
    end
    if known then return known end
    if p then
      return list_error(c, tenant, p)
    end
    return nil
  end

  -- The tenant hash's fields as `tenant_error` read them with `names` (their values in that
  -- order, false when absent), or nil when the call's check of the tenant read none.
  function tenant_read(c, tenant)
    return c.tenant_reads and c.tenant_reads[tenant]
  end
end
