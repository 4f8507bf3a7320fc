-- lib/lease.lua: the lease transition, shared by the lease script and complete_batch (which
-- also leases). Provides lease_args (its arguments, checked), LEASE_KEYS and lease_reads (the queue
-- keys it checks, the hashes by reading them), lease_look (the lease script's reads before its
-- first write, which check the keys they read) and lease_tasks (promote, reap, unpark, then serve
-- tenants by fair share).
-- Needs: format, args, keys, counters, events, park, task, ready, workers, maintenance, limits
-- Per-call state: none of its own (the other files' in the context).

local lease_args, LEASE_KEYS, lease_reads, lease_look, lease_tasks
do
  -- The queue's starvation-bound step (ms; 0 = strict priority) given the config hash's
  -- `aging_step_ms` as read. A stored value outside the range `configure` accepts reads as 0.
  local function aging_step(stored)
    local step = num(stored, 0)
    if step < 0 or step > FACTS.aging_step_ms_max then
      return 0
    end
    return step
  end

  -- Most tasks one call leases, and most limited tenants parked (and parked tenants unparked)
  -- per call.
  local LEASE_MAX = 100
  -- Most tenants a lease may be limited to (lua/src/facts.rs, LEASE_TENANTS_MAX).
  local TENANTS_MAX = FACTS.lease_tenants_max
  local TENANT_SCAN_MAX = 64
  -- Tasks a visit gives the head tenant at least (lua/src/facts.rs, FAIR_QUANTUM).
  local QUANTUM = FACTS.fair_quantum
  -- Values per leased task in the reply (lua/src/facts.rs, LEASED_ENTRY_LEN).
  local ENTRY = FACTS.leased_entry_len
  local TENANT_FIELDS = {'weight', 'max_inflight', 'rate_per_s', 'burst', 'tokens', 'tokens_at', 'n:leased',
    'rp', 'served'}

  -- The lease arguments at ARGV[base + 1 .. base + 6] (the `lease` script's ARGV[1..6], see its
  -- header) and, from ARGV[base + 7] on, the tenants the lease is limited to (none: every
  -- tenant): a table {worker, n, bits, seed, promote_bound, reap_bound, tenants (nil or a list)},
  -- or nil and an INVALID error reply. Read and checked before a call writes anything.
  function lease_args(ARGV, base)
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
    local nt = #ARGV - base - 6
    if nt > 0 then
      if nt > TENANTS_MAX then
        return nil, redis.error_reply('INVALID at most ' .. TENANTS_MAX .. ' tenants')
      end
      a.tenants = {}
      for i = 1, nt do
        local t = ARGV[base + 6 + i]
        if t == '' or has_separator(t) then
          return nil, redis.error_reply('INVALID tenant names must be non-empty, without spaces or newlines')
        end
        a.tenants[i] = t
      end
    end
    return a
  end

  -- The first two (tenant, virtual time) of the tenants set among `tenants` (a lease limited to
  -- them), flat as ZRANGE 0 1 WITHSCORES answers, in the set's order (virtual time, then name).
  -- One ZSCORE per tenant named (at most TENANTS_MAX).
  local function head_among(c, tenants)
    local a, b
    for i = 1, #tenants do
      local t = tenants[i]
      local v = redis.call('ZSCORE', c.K_TENANTS, t)
      if v then
        local e = {t, v, tonumber(v)}
        if not a or e[3] < a[3] or (e[3] == a[3] and t < a[1]) then
          a, b = e, a
        elseif not b or e[3] < b[3] or (e[3] == b[3] and t < b[1]) then
          b = e
        end
      end
    end
    if not a then return {} end
    if not b then return {a[1], a[2]} end
    return {a[1], a[2], b[1], b[2]}
  end

  -- The queue keys a lease writes or reads by type (check_keys before the first write); the
  -- stats and config hashes are checked by `lease_reads`, which reads them.
  LEASE_KEYS = {3, 4, 5, 6, 12, 15, 16}

  -- The config hash's paused and aging_step_ms, read (with pcall, so that the read checks the
  -- hash's type) before the call's first write: {paused, step}, or nil and the CORRUPT reply.
  local function read_config(c)
    local cf = redis.pcall('HMGET', c.K_CONFIG, 'paused', 'aging_step_ms')
    if cf.err then
      return nil, type_error(c.K_CONFIG, 'hash') or redis.error_reply(cf.err)
    end
    return {paused = cf[1] == '1', step = aging_step(cf[2])}
  end

  -- The stats hash's virtual time, read the same way (only the lease loop writes it in a call;
  -- the unparks read it themselves), into `r.vtime`: nil and the CORRUPT reply when the hash is
  -- of another type, else `r`.
  local function read_vtime(c, r)
    local vt = redis.pcall('HGET', c.K_STATS, 'vtime')
    if type(vt) == 'table' then
      return nil, type_error(c.K_STATS, 'hash') or redis.error_reply(vt.err)
    end
    r.vtime = vtime_of(vt)
    return r
  end

  -- What a lease reads of the queue's hashes before the call's first write, so that the reads
  -- check their types (instead of a TYPE each): {paused, step, vtime} (read_config, read_vtime),
  -- or nil and the CORRUPT reply.
  function lease_reads(c)
    local r, bad = read_config(c)
    if not r then return nil, bad end
    return read_vtime(c, r)
  end

  -- No queue key checked by type alone (check_keys): the lease script's reads check them.
  local NO_TYPES = {}

  -- A ZSET read made with pcall before the first write: its reply, or nil and the CORRUPT reply
  -- when `key` holds another type.
  local function zread(key, ...)
    local v = redis.pcall(...)
    if type(v) == 'table' and v.err then
      return nil, type_error(key, 'zset') or redis.error_reply(v.err)
    end
    return v
  end

  -- What the lease script reads before its first write (with `a` from `lease_args`, at `now`):
  -- the config (read_config), and the ends of the indexes its upkeep and its answer need, read
  -- so that the reads check the keys' types instead of a TYPE each (about 4,400 Redis
  -- instructions apiece). When they show work (a due task, an expired lease, a due parked
  -- tenant, a ready one in an unpaused queue), the keys the call may then write and has not read
  -- are checked too: the stream, the dead set (when a lease expired) and the stats hash (by
  -- reading the virtual time). An idle lease, the most common call, writes only the workers set,
  -- which it has read: it checks nothing else (lib/keys.lua: a call checks the keys it writes)
  -- and makes 8 calls into Redis (19 before).
  -- Returns {paused, step, vtime (nil when idle), idle, pre = {sched_first, parked_first (the
  -- sets' first scores, -1 when empty), expired (the ids reap_expired reads), old_workers
  -- (silent_workers'), tenants (the tenants set's size)}}, or nil and the INVALID / CORRUPT
  -- reply. Nothing is written.
  function lease_look(c, a, now)
    local bad = check_keys(c, NO_TYPES)
    if bad then return nil, bad end
    local r
    r, bad = read_config(c)
    if not r then return nil, bad end
    local pre = {}
    local v
    pre.sched_first, bad = read_first(c.K_SCHEDULED)
    if not pre.sched_first then return nil, bad end
    if a.reap_bound > 0 then
      v, bad = zread(c.K_LEASES, 'ZRANGEBYSCORE', c.K_LEASES, '-inf', '(' .. istr(now), 'LIMIT', '0', istr(a.reap_bound))
    else
      v, bad = zread(c.K_LEASES, 'ZCARD', c.K_LEASES)
      v = v and {}
    end
    if not v then return nil, bad end
    pre.expired = v
    pre.parked_first, bad = read_first(c.K_PARKED)
    if not pre.parked_first then return nil, bad end
    v, bad = zread(c.K_TENANTS, 'ZCARD', c.K_TENANTS)
    if not v then return nil, bad end
    pre.tenants = v
    v = silent_workers(c, now)
    if v.err then return nil, type_error(c.K_WORKERS, 'zset') or redis.error_reply(v.err) end
    pre.old_workers = v
    r.pre = pre
    r.idle = not ((a.promote_bound > 0 and pre.sched_first >= 0 and pre.sched_first <= now)
      or #pre.expired > 0 or (pre.parked_first >= 0 and pre.parked_first <= now)
      or (pre.tenants > 0 and not r.paused))
    if not r.idle then
      bad = type_error(c.K_EVENTS, 'stream') or (#pre.expired > 0 and type_error(c.K_DEAD, 'zset'))
      if bad then return nil, bad end
      return read_vtime(c, r)
    end
    return r
  end

  -- When the task `id` became ready (ms): its last change, or its creation when never changed
  -- (`now` when its hash is gone or not a hash: lease drops such an entry).
  local function ready_since(c, id, now)
    local f = redis.pcall('HMGET', task_key(c, id), F.updated_at, F.created_at)
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
  local function pop_ready(c, tenant, k, step, now, m)
    local out = {}
    local function bad(r)
      return type(r) == 'table' and r.err ~= nil
    end
    m = rp_exact(c, tenant, m, true)
    if step <= 0 then
      for p = 9, 0, -1 do
        if #out >= k then break end
        if rp_has(m, p) then
          local key = ready_key(c, tenant, p)
          local want = k - #out
          local got = redis.pcall('LPOP', key, istr(want))
          if bad(got) then
            repaired(c, 1)
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
        local h = redis.pcall('LRANGE', ready_key(c, tenant, p), '0', '0')
        if bad(h) then repaired(c, 1) end
        if bad(h) or #h == 0 then
          heads[p] = false
          if rp_has(m, p) then m = m - POW2[p] end
        else
          heads[p] = ready_since(c, h[1], now) - p * step
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
        out[#out + 1] = redis.call('LPOP', ready_key(c, tenant, best))
        look(best)
      end
    end
    rp_store(c, tenant, m)
    return out, m > 0
  end

  -- Lease up to a.n ready tasks (a from `lease_args`) at `now`, as the `lease` script's header
  -- says: promote due tasks, record the worker, reap expired leases, unpark due tenants, then
  -- serve tenants by fair share. `r` is what `lease_reads` (the lease script: `lease_look`) answered before the first
  -- write. Returns the reply's flat array of leased tasks and next_ms.
  function lease_tasks(c, a, now, r)
    local worker, n, bits = a.worker, a.n, a.bits
    -- The lease script's reads before its first write (lease_look), or nil (complete_batch): what
    -- they show needs no second read while the call has not changed it.
    local pre = r.pre
    defer_events(c)
    local promoted, reaped, unparked = 0, 0, 0
    if a.promote_bound > 0 and not (pre and (pre.sched_first < 0 or pre.sched_first > now)) then
      promoted = promote_due(c, now, a.promote_bound)
    end
    note_worker(c, worker, now, pre and pre.old_workers)
    if a.reap_bound > 0 then reaped = reap_expired(c, now, a.reap_bound, a.seed, pre and pre.expired) end

    -- The reply's tasks, flat (FACTS.leased_entry_len values each), and how many.
    local out, leased_n = {}, 0
    local paused, step = r.paused, r.step
    if not (pre and (pre.parked_first < 0 or pre.parked_first > now)) then
      unparked = unpark_due(c, now, TENANT_SCAN_MAX)
    end
    -- Nothing ready before the call and nothing made ready by it: the tenants set is empty.
    local none_ready = pre and pre.tenants == 0 and promoted + reaped + unparked == 0
    -- Whether the call has changed the parked set (the upkeep above, or a tenant parked below).
    local parked_changed = promoted + reaped + unparked > 0
    -- The queue's status counters and `served` are added once at the end, a tenant's at the end
    -- of each visit (or, when they hold garbage, at the end too); the tenant's live leases are
    -- read from its hash plus the leases this call made and deferred (tenant -> count). Counts
    -- still deferred by the caller (complete_batch) or by the promotions and reaps above are
    -- written first, so the hash holds them (a reaped lease no longer counts against its
    -- tenant's cap).
    flush_counts(c)
    defer_counts(c)
    local leased_now = {}
    local lease_scores = {}
    local now_s = istr(now)
    -- Tenants whose keys this call has checked (tenant -> true).
    local tenant_ok = {}
    -- The queue's virtual time, read once (lease_reads): only this loop writes it in a call.
    local queue_vt = r.vtime
    -- Each pass leases tasks of one tenant, drops a tenant with no ready work, parks a limited
    -- tenant, or stops; so the passes are bounded. A pass (a visit) gives the head tenant its
    -- quantum (FAIR_QUANTUM tasks), or more when start-time fair queuing would (while its virtual
    -- time stays ahead of the next tenant's), as far as its limits allow and the call still wants.
    for _ = 1, 2 * n + TENANT_SCAN_MAX do
      if paused or none_ready or leased_n >= n then break end
      local head
      if a.tenants then
        head = head_among(c, a.tenants)
      else
        head = redis.call('ZRANGE', c.K_TENANTS, '0', '1', 'WITHSCORES')
      end
      if #head == 0 then break end
      local tenant, vt = head[1], num(head[2], 0)
      -- Whether the tenants set holds a tenant after this pass: another one, or this one put back
      -- (nothing else in a pass adds to it). When not, the next pass would find it empty.
      local others = #head >= 4
      -- A tenant whose own keys hold foreign data cannot be served: it leaves the fair-share set
      -- (counted as repaired) so that the other tenants are.
      -- The hash's type is checked by reading its fields (an HMGET of another type fails); a
      -- ready list of another type is found by the pops (pop_ready). A nameless tenant has no keys.
      if tenant == '' then tenant_ok[tenant] = false end
      local terr = tenant_ok[tenant] == false
      local th = {}
      if not terr then
        local vals = redis.pcall('HMGET', tenant_key(c, tenant), unpack(TENANT_FIELDS))
        if vals.err then
          terr = true
          tenant_ok[tenant] = false
        else
          tenant_ok[tenant] = true
          for j = 1, #TENANT_FIELDS do
            th[TENANT_FIELDS[j]] = vals[j]
          end
        end
      end
      -- A tenant at its in-flight cap or out of tokens leaves the fair-share set until a lease of
      -- its ends or a token is back (the parked set), so it is never scanned again meanwhile.
      local parked_until = nil
      local room = n - leased_n
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
        redis.call('ZREM', c.K_TENANTS, tenant)
        repaired(c, 1)
      elseif parked_until then
        redis.call('ZREM', c.K_TENANTS, tenant)
        redis.call('ZADD', c.K_PARKED, istr(parked_until), tenant)
        c.any_parked = nil
        parked_changed = true
      else
        local weight = num(th.weight, 1)
        if weight <= 0 then weight = 1 end
        -- A tenant skipped while limited kept its old virtual time; it restarts at the queue's
        -- current one, so a lifted limit does not turn into a burst of stored-up credit.
        if vt < queue_vt then vt = queue_vt end
        -- How many tasks in a row: the quantum, and beyond it while (its virtual time, name) stays
        -- before the next tenant's in the tenants set's order, as one pick per pass would have
        -- found. Each task advances the tenant's virtual time by 1 / weight.
        local k = 1
        if #head >= 4 then
          local next_name, next_vt = head[3], num(head[4], 0)
          local v = vt + 1 / weight
          while k < room and (k < QUANTUM or v < next_vt or (v == next_vt and tenant < next_name)) do
            k = k + 1
            v = v + 1 / weight
          end
        else
          k = room
        end
        -- The mask as this call last stored it, or as read with the tenant's fields.
        if c.tenant_rps[tenant] == nil then c.tenant_rps[tenant] = rp_parse(th.rp) end
        local popped, left = pop_ready(c, tenant, k, step, now, c.tenant_rps[tenant])
        if #popped == 0 and not left then
          redis.call('ZREM', c.K_TENANTS, tenant)
        else
          local last_vt = vt
          for j = 2, #popped do
            last_vt = last_vt + 1 / weight
          end
          -- The queue's virtual time is the tag this visit started at (the smallest of the set's):
          -- a tenant that becomes backlogged starts there, not behind the visit's quantum. A
          -- lease limited to some tenants may visit one that is not the smallest: it leaves the
          -- queue's time to the unlimited leases.
          if vt ~= queue_vt and not a.tenants then
            queue_vt = vt
            redis.call('HSET', c.K_STATS, 'vtime', fstr(vt))
          end
          if not left then
            redis.call('ZREM', c.K_TENANTS, tenant)
          else
            redis.call('ZADD', c.K_TENANTS, fstr(last_vt + 1 / weight), tenant)
            others = true
          end
          local served = 0
          for j = 1, #popped do
            local id = popped[j]
            local key = task_key(c, id)
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
              local epoch = next_count(c, key, F.epoch, at.e and flat[at.e])
              local attempt = next_count(c, key, F.attempt, at.a and flat[at.a])
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
              emit(c, now, 'leased', id, tenant, attempt, 'w', worker, 'epoch', epoch_s,
                'wait_ms', istr(wait))
              flat[#flat + 1] = 'id'
              flat[#flat + 1] = id
              -- This task's FACTS.leased_entry_len values (lease.lua's header).
              local o = leased_n * ENTRY
              leased_n = leased_n + 1
              out[o + 1], out[o + 3], out[o + 4] = exp, epoch, attempt
              if at[F.last_error] or at[F.result] or at[F.history] then
                -- Free text may hold any byte: the fields as an array, the payload among them.
                out[o + 2], out[o + 5] = flat, false
              else
                -- The fields joined by NUL, the payload apart (false: a record without one).
                local payload = false
                if at.p then
                  payload = flat[at.p]
                  flat[at.p] = ''
                end
                out[o + 2], out[o + 5] = table.concat(flat, '\0'), payload
              end
            else
              -- A ready-set entry whose hash is gone, is not a hash, or is not queued: dropped.
              repaired(c, 1)
            end
          end
          if served > 0 then
            local tk = tenant_key(c, tenant)
            -- The tenant's counters as this visit read them: when plain integers, written at once
            -- with its bucket in one HSET of their new values (nothing in the call writes them
            -- between; a later visit reads them again); else deferred, and counted against its
            -- cap by `leased_now` until the flush.
            local nl, sv = stored_int(th['n:leased']), stored_int(th.served)
            if nl and sv then
              count(c, c.K_STATS, 'n:queued', -served)
              count(c, c.K_STATS, 'n:leased', served)
              if tokens then
                redis.call('HSET', tk, 'tokens', fstr(tokens - served), 'tokens_at', istr(now), 'n:leased',
                  istr(nl + served), 'served', istr(sv + served))
              else
                redis.call('HSET', tk, 'n:leased', istr(nl + served), 'served', istr(sv + served))
              end
            else
              count_status(c, tenant, 'queued', 'leased', served)
              leased_now[tenant] = (leased_now[tenant] or 0) + served
              if tokens then
                redis.call('HSET', tk, 'tokens', fstr(tokens - served), 'tokens_at', istr(now))
              end
              count(c, tk, 'served', served)
            end
            count(c, c.K_STATS, 'served', served)
          end
        end
      end
      if not others then break end
    end
    if #lease_scores > 0 then
      redis.call('ZADD', c.K_LEASES, unpack(lease_scores))
    end
    flush_counts(c)
    flush_events(c)

    -- When to ask again: now when an eligible tenant has ready work left; otherwise the earliest of
    -- the next scheduled run_at and the next rate-limit token; -1 when unknown (paused, or only
    -- in-flight caps hold work back: a lease ending frees them).
    -- (The scheduled set changes only by promotions and reaps' retries; the parked set's first
    -- entry read before the call is its first one scored below PARKED_CAPPED unless it is capped.)
    local next_ms
    if pre and promoted + reaped == 0 then
      next_ms = pre.sched_first
    else
      next_ms = first_score(c.K_SCHEDULED)
    end
    local refill
    if pre and not parked_changed then
      refill = {}
      if pre.parked_first >= 0 and pre.parked_first < PARKED_CAPPED then refill = {'', pre.parked_first} end
    else
      refill = redis.call('ZRANGEBYSCORE', c.K_PARKED, '-inf', '(' .. istr(PARKED_CAPPED), 'LIMIT', '0', '1',
        'WITHSCORES')
    end
    if #refill > 0 then
      local at = tonumber(refill[2])
      if at < now then at = now end
      if next_ms < 0 or at < next_ms then next_ms = at end
    end
    if not paused and leased_n >= n then
      if a.tenants then
        if #head_among(c, a.tenants) > 0 then next_ms = now end
      elseif redis.call('ZCARD', c.K_TENANTS) > 0 then
        next_ms = now
      end
    end
    if paused then
      next_ms = -1
    end
    return out, next_ms
  end
end
