-- lib/ctx.lua: the per-call context. A script makes one at its start (`local c = new_ctx(KEYS)`)
-- and passes it to every helper that reads a queue key or keeps state for the call; the lib files
-- themselves hold only constants, functions and bounded pure memos at their top level, so two
-- calls that share one Lua state (as Redis Functions would) share nothing mutable.
-- Provides new_ctx.
-- Needs: nothing
-- Per-call state: the context itself. Its fields (the memo tables among them are made on first
-- use):
--   KEYS, K_TASK .. K_WORKERS  the queue key set as passed to the call (keys.lua documents it)
--   counts                     counters.lua: the deferred counter increments (false: not deferred)
--   status_fields, tenant_keys counters.lua: memos of 'n:<status>' and tenant hash keys
--   tenant_errors, list_errors keys.lua: the type checks of tenant hashes and ready lists made
--   tenant_reads               keys.lua: tenant hash fields read by the check (false: none)
--   ev_*                       events.lua: the pending batch of events (ev_buf false: events are
--                              written as they come), the last id written, and the stored one
--                              as the script read it (ev_read; nil: not read)
--   woken                      park.lua: whether the call has published the queue's wake-up
--   tenant_rps                 ready.lua: the tenants' ready-list masks as last read or stored
--   stored_args                task.lua: the HMGET arguments of each names table
--   unpark_checked             outcome.lua: the tenants whose parked state a completion checked
--   any_parked                 outcome.lua: whether the parked set held a tenant when a
--                              completion first looked (nil: not read; lease.lua resets it when
--                              it parks one)
--
-- The library's shape (docs/design-notes.md, note 43): each file declares, on its first line of
-- code, the names it provides (`local a, b, c`), and defines them in one `do` block whose other
-- locals stay private to it; a file uses another's names directly. Everything is `local`: Redis
-- refuses scripts that create globals.

local new_ctx
do
  -- The context's tables of per-call memos, made on first use (most calls touch few of them):
  -- reading one of these fields while it is absent makes it an empty table.
  local LAZY = {status_fields = true, tenant_keys = true, tenant_errors = true, list_errors = true,
    tenant_rps = true, stored_args = true, unpark_checked = true}
  local LAZY_META = {__index = function(c, k)
    if LAZY[k] then
      local t = {}
      c[k] = t
      return t
    end
    return nil
  end}

  -- A fresh context for a call given the queue key set `KEYS` (the table Redis passes; a
  -- script whose KEYS are not the queue key set refuses the call in `check_keys`). One
  -- constructor, so the table is sized once (the nils reserve the slots of the fields set
  -- later, the memo tables among them).
  function new_ctx(KEYS)
    return setmetatable({
      KEYS = KEYS,
      K_TASK = KEYS[1], K_READY = KEYS[2], K_TENANTS = KEYS[3], K_SCHEDULED = KEYS[4],
      K_LEASES = KEYS[5], K_DEAD = KEYS[6], K_COMPLETED = KEYS[7], K_CANCELLED = KEYS[8],
      K_IDEM = KEYS[9], K_TENANT = KEYS[10], K_STATS = KEYS[11], K_EVENTS = KEYS[12],
      K_KNOWN = KEYS[13], K_CONFIG = KEYS[14], K_PARKED = KEYS[15], K_WORKERS = KEYS[16],
      counts = false, status_fields = nil, tenant_keys = nil,
      tenant_errors = nil, list_errors = nil, tenant_reads = false,
      ev_buf = false, ev_len = 0, ev_count = 0, ev_now = 0,
      ev_last_ms = false, ev_last_n = false, ev_entries = 0, ev_first_n = 0, ev_read = nil,
      woken = false,
      tenant_rps = nil,
      stored_args = nil,
      unpark_checked = nil,
      any_parked = nil,
    }, LAZY_META)
  end
end
