-- lib/workers.lua: the queue's set of workers seen. Provides note_worker (record a call of a
-- worker, forget silent ones) and silent_workers (the read note_worker makes, made earlier).
-- Needs: format
-- Per-call state: none.

local note_worker, silent_workers
do
  -- How long a worker stays in the workers set after its last lease or heartbeat call (ms).
  local WORKER_FORGET_MS = FACTS.worker_forget_ms

  -- Most silent workers forgotten per call, and the read limits as strings (a number passed to
  -- redis.call costs Redis a %.17g printf).
  local FORGET_MAX = 8
  -- (No library function at the top level: a library being loaded by FUNCTION LOAD has no `string`.)
  local FORGET_MAX_S, LOOK_MAX_S = '' .. FORGET_MAX, '' .. (FORGET_MAX + 1)

  -- The workers silent for WORKER_FORGET_MS at `now`, up to one more than a call forgets, read
  -- with pcall so that a caller can read them before its first write (the read checks the set's
  -- type): the list, or the error table when the key holds another type.
  function silent_workers(c, now)
    return redis.pcall('ZRANGEBYSCORE', c.K_WORKERS, '-inf', istr(now - WORKER_FORGET_MS), 'LIMIT', '0',
      LOOK_MAX_S)
  end

  -- Record that `worker` called at `now`, and forget up to FORGET_MAX workers silent for
  -- WORKER_FORGET_MS: those of `old` (what silent_workers answered earlier in the call, at `now`)
  -- other than `worker`, or when `old` is nil those read after the record.
  function note_worker(c, worker, now, old)
    redis.call('ZADD', c.K_WORKERS, istr(now), worker)
    if old == nil then
      old = redis.call('ZRANGEBYSCORE', c.K_WORKERS, '-inf', istr(now - WORKER_FORGET_MS), 'LIMIT', '0', FORGET_MAX_S)
    end
    local forgotten = 0
    for i = 1, #old do
      if forgotten >= FORGET_MAX then break end
      if old[i] ~= worker then
        redis.call('ZREM', c.K_WORKERS, old[i])
        forgotten = forgotten + 1
      end
    end
  end
end
