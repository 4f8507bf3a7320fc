-- lib/retry.lua: a failed attempt. Provides fail_attempt (retry with backoff, or the DLQ) and
-- FAIL_FIELDS (the task fields it reads); used by fail and by the reaping of expired leases.
-- Needs: format, keys, counters, events, status, task
-- Per-call state: none of its own.

local FAIL_FIELDS, fail_attempt
do
  -- Longest backoff ever computed (ms): a year, whatever the stored fields say.
  local BACKOFF_MS_MAX = 31622400000

  -- Backoff before the next attempt after attempt `attempt` failed (ms): exponential, capped, with
  -- +/- jitter drawn from `r` in [0, 1) supplied by the caller.
  local function backoff_ms(t, attempt, r)
    local init = num(t.b_init, 1000)
    local mult = num(t.b_mult, 2)
    local max = num(t.b_max, 300000)
    local jitter = num(t.b_jitter, 0)
    local d = init * math.pow(mult, attempt - 1)
    if d > max then
      d = max
    end
    d = d * (1 - jitter + 2 * jitter * r)
    if not (d >= 0) then
      d = 0
    end
    if d > BACKOFF_MS_MAX then
      d = BACKOFF_MS_MAX
    end
    return math.floor(d)
  end

  FAIL_FIELDS = {'tenant', 'attempt', 'max_retries', 'b_init', 'b_mult', 'b_max', 'b_jitter', 'worker',
    'status'}

  -- A leased task's attempt failed (handler error, timeout or lease expiry): schedule a retry with
  -- backoff, or move it to the DLQ when retries are spent or the error is permanent.
  -- Returns the new status ('retrying' or 'dead'). The caller has already removed the lease.
  function fail_attempt(c, id, t, now, err, retryable, r, outcome)
    local attempt = num(t.attempt, 1)
    local max_retries = num(t.max_retries, 0)
    local key = task_key(c, id)
    err = truncate(err, ERROR_MAX)
    add_history(c, id, istr(attempt) .. ' ' .. istr(now) .. ' ' .. (t.worker or '-') .. ' ' .. outcome .. ' ' .. err)
    redis.call('HSET', key, F.last_error, err, F.updated_at, istr(now), F.outcome, outcome,
      F.lease_exp, '', F.worker, '')
    hincr(c, c.K_STATS, 'total:failed', 1)
    if retryable and attempt < max_retries + 1 then
      local run_at = now + backoff_ms(t, attempt, r)
      redis.call('ZADD', c.K_SCHEDULED, istr(run_at), id)
      redis.call('HSET', key, F.run_at, istr(run_at))
      set_status(c, id, t.tenant, 'leased', 'retrying')
      emit(c, now, 'retrying', id, t.tenant, attempt, 'run_at', istr(run_at), 'm', err)
      return 'retrying'
    end
    redis.call('ZADD', c.K_DEAD, istr(now), id)
    redis.call('HSET', key, F.finished_at, istr(now))
    hincr(c, c.K_STATS, 'total:dead', 1)
    set_status(c, id, t.tenant, 'leased', 'dead')
    emit(c, now, 'dead', id, t.tenant, attempt, 'm', err)
    return 'dead'
  end
end
