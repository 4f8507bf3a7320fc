-- lib/workers.lua: the queue's set of workers seen. Provides note_worker (record a call of a
-- worker, forget silent ones).
-- Needs: format
-- Per-call state: none.

local note_worker
do
  -- How long a worker stays in the workers set after its last lease or heartbeat call (ms).
  local WORKER_FORGET_MS = FACTS.worker_forget_ms

  -- Record that `worker` called at `now`, and forget up to 8 workers silent for WORKER_FORGET_MS.
  function note_worker(c, worker, now)
    redis.call('ZADD', c.K_WORKERS, istr(now), worker)
    local old = redis.call('ZRANGEBYSCORE', c.K_WORKERS, '-inf', istr(now - WORKER_FORGET_MS), 'LIMIT', 0, 8)
    for i = 1, #old do
      redis.call('ZREM', c.K_WORKERS, old[i])
    end
  end
end
