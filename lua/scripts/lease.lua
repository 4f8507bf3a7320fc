-- lease: hand up to N ready tasks to a worker.
--
-- Transition: queued -> leased (and, first, scheduled/retrying -> queued for due tasks, and
-- leased -> retrying/dead for expired leases, each bounded).
-- Tenants are served by virtual time (start-time fair queuing with per-tenant weights, default 1):
-- the backlogged tenant with the smallest virtual time goes next and its time advances by
-- 1/weight; a tenant that becomes backlogged again, or was skipped while limited, starts at the
-- queue's current virtual time (no credit is stored up while idle or limited).
-- A tenant at its max_inflight (live leases) or out of rate-limit tokens (a token bucket of
-- rate_per_s refilled continuously, capped at burst) is skipped, not waited for: it moves to the
-- parked set until one of its leases ends or its next token is due, so limited tenants are never
-- scanned again while they wait and cannot hide eligible ones. A paused queue
-- leases nothing (due tasks are still promoted and expired leases reaped).
-- Within a tenant the most urgent priority goes first, FIFO within a priority (or, with the
-- queue's aging_step_ms, the heads of the priority lists by when each became ready minus
-- priority x step).
-- The lease token is "<epoch>-<random>": epoch grows by one with every lease of the task (the
-- fencing epoch given to handlers), the random part comes from the caller.
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:      prefix of HASH orq:{q}:task:<id>
--   KEYS[2]  orq:{q}:ready:     prefix of LIST orq:{q}:ready:<priority>:<tenant>
--   KEYS[3]  orq:{q}:tenants    ZSET tenants with ready work, score=virtual time
--   KEYS[4]  orq:{q}:scheduled  ZSET score=run_at ms
--   KEYS[5]  orq:{q}:leases     ZSET score=lease deadline ms
--   KEYS[6]  orq:{q}:dead       ZSET score=time of death ms
--   KEYS[10] orq:{q}:tenant:    prefix of HASH orq:{q}:tenant:<tenant>
--   KEYS[11] orq:{q}:stats      HASH counters, vtime
--   KEYS[12] orq:{q}:events     STREAM
--   KEYS[14] orq:{q}:config     HASH paused, aging_step_ms
--   KEYS[15] orq:{q}:parked     ZSET tenants held back by a limit, score=ms when eligible again
--   KEYS[16] orq:{q}:workers    ZSET workers seen, score=last call ms
--
-- ARGV:
--   ARGV[1]  string   worker id (recorded on the task and in events)
--   ARGV[2]  integer  n, most tasks to lease (1..100)
--   ARGV[3]  string   random token bits from the caller (hex, 1..32 chars)
--   ARGV[4]  number   jitter seed in [0, 1) for retries of reaped leases
--   ARGV[5]  integer  promote bound: most due scheduled tasks moved per call (0..1000)
--   ARGV[6]  integer  reap bound: most expired leases reaped per call (0..1000)
--   ARGV[7..] string  optional: the tenants the lease is limited to (at most
--                     FACTS.lease_tenants_max, each non-empty without spaces or newlines; none:
--                     every tenant). The limited lease serves only them, in their fair-share
--                     order (their places in KEYS[3]), and leaves the queue's virtual time to
--                     unlimited leases; promotions, reaps and unparks are the queue's as always.
--
-- Returns: {now_ms, {expires_at_ms, fields, epoch, attempt, payload, ...}, next_ms}: the leased
--   tasks' values one after another in one flat array, FACTS.leased_entry_len of them per task
--   (a Lua table per task cost Redis ~4,000 instructions a task in its allocation and in the
--   reply's conversion, which probes every table for seven special fields; docs/design-notes.md,
--   note 58). fields is the task's compact hash as it was before this lease (as HGETALL gives
--   it, in the stored names of F, lib/task.lua), then id: for a record without free text
--   (last_error, result or history), one string, the names and values joined by NUL bytes, the
--   payload's value left empty there and sent as payload (false when the record has none; a
--   reply of five values a task instead of some twenty costs Redis ~8,000 instructions a task
--   less; the other values are numbers, names the callers validate ([A-Za-z0-9._:-]), ids
--   and the trace context (printable ASCII, enqueue.lua), which hold no NUL); for a record with free text, which may hold any byte, a flat array, and
--   payload false (the payload is in the array). The
--   lease wrote epoch, attempt, token =
--   "<epoch>-<ARGV[3]>", worker = ARGV[1], lease_exp = expires_at_ms, updated_at = now_ms (the
--   lease's start while it is held) and status = leased, which the caller applies (`orq::ops::lease`): replying with them, patched
--   into the record, cost Redis ~27,000 instructions per task. It writes no outcome (that of
--   the task's last lease, if any, stays until this lease ends) and no leased_at.
--   next_ms says when to ask again: now_ms when the call filled its n and ready work is left;
--   else the earliest of the next scheduled run_at and the time a rate-limited tenant has a
--   token again; -1 when unknown (nothing waits, the queue is paused, or only in-flight caps
--   hold work back).
-- Errors: INVALID <message>; CORRUPT <key> (a queue key of another Redis type; nothing written).
--   Entries met in the scheduled set, the leases set, a ready set or the tenants set that cannot
--   be acted on (lib/keys.lua: corrupt or foreign state) are dropped and counted in stats `total:repaired`.
-- Emits: queued (promoted; from = scheduled | retrying), retrying / dead (reaped), leased (w worker,
--   epoch, wait_ms = time the task waited in its ready set, ms). Records the worker as seen
--   (KEYS[16]).
--
-- Uses: ctx, format, lease

local c = new_ctx(KEYS)

local now = now_ms()
local a, e = lease_args(ARGV, 0)
if not a then return e end
local r, bad = lease_look(c, a, now)
if not r then return bad end
local out, next_ms = lease_tasks(c, a, now, r)
return {now, out, next_ms}
