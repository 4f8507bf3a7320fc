-- list: one page of tasks by status, with an opaque cursor.
--
-- Transition: none (a read). Pages through the index of the status asked for, or through every
-- index in a fixed order when none is given: queued (each tenant's ready lists, tenants in name
-- order, most urgent priority first, FIFO within a priority), scheduled + retrying (earliest run_at first), leased (earliest
-- deadline first), dead, completed, cancelled (newest first). Filters by tenant and type while
-- examining at most `scan` index entries per page (an empty index counts as one), so a page
-- can be short (or empty) with a cursor to continue. The cursor is an offset: under concurrent changes a page may repeat or skip
-- a task, like any offset pagination.
--
-- KEYS: the queue key set (lib/keys.lua); this script uses
--   KEYS[1]  orq:{q}:task:          prefix of HASH orq:{q}:task:<id>
--   KEYS[2]  orq:{q}:ready:         prefix of LIST orq:{q}:ready:<priority>:<tenant>
--   KEYS[4]  orq:{q}:scheduled      ZSET score=run_at ms
--   KEYS[5]  orq:{q}:leases         ZSET score=lease deadline ms
--   KEYS[6]  orq:{q}:dead           ZSET score=time of death ms
--   KEYS[7]  orq:{q}:completed      ZSET score=finish time ms
--   KEYS[8]  orq:{q}:cancelled      ZSET score=cancel time ms
--   KEYS[13] orq:{q}:known_tenants  ZSET tenant names
--
-- ARGV:
--   ARGV[1]  string   status: queued|scheduled|retrying|leased|dead|completed|cancelled, or '' for all
--   ARGV[2]  string   tenant filter, or ''
--   ARGV[3]  string   type filter, or ''
--   ARGV[4]  string   cursor from the previous page, or '' for the first page ("src:sub:offset")
--   ARGV[5]  integer  page size (1..1000)
--   ARGV[6]  integer  most index entries examined (1..100000)
--
-- Returns: {now_ms, {fields, ...}, next_cursor} where each fields is a task as lib/task.lua's `task_view`
--   gives it (the hash, flat, then id), and
--   next_cursor is '' when the listing is complete.
-- Errors: INVALID; CORRUPT <key> (an index holds another Redis type than a ZSET). Entries whose
--   task hash is missing or of another type, and ready lists of another type, are skipped.
-- Emits: nothing.
--
-- Uses: ctx, format, args, keys, task

local c = new_ctx(KEYS)

local now = now_ms()
local bad = check_keys(c, {4, 5, 6, 7, 8, 13})
if bad then return bad end
local status, tenant, ttype = ARGV[1], ARGV[2], ARGV[3]
local limit, e = arg_int(ARGV[5], 'limit', 1, 1000)
if not limit then return redis.error_reply(e) end
local scan
scan, e = arg_int(ARGV[6], 'scan', 1, 100000)
if not scan then return redis.error_reply(e) end

-- Sources in listing order: {index key or false for ready lists, reverse order, status filter set}.
local SOURCES = {
  {false, false, {queued = true}},
  {c.K_SCHEDULED, false, {scheduled = true, retrying = true}},
  {c.K_LEASES, false, {leased = true}},
  {c.K_DEAD, true, {dead = true}},
  {c.K_COMPLETED, true, {completed = true}},
  {c.K_CANCELLED, true, {cancelled = true}},
}
local SOURCE_OF = {queued = 1, scheduled = 2, retrying = 2, leased = 3, dead = 4, completed = 5,
  cancelled = 6}
-- Largest sub-index or offset a cursor may carry.
local CURSOR_MAX = 2147483647
-- The fields a listed task is filtered by.
local LIST_FIELDS = {'status', 'tenant', 'type'}
local first, last = 1, #SOURCES
if status ~= '' then
  if not SOURCE_OF[status] then return redis.error_reply('INVALID unknown status ' .. status) end
  first, last = SOURCE_OF[status], SOURCE_OF[status]
end

local src, sub, off = first, 0, 0
if ARGV[4] ~= '' then
  local a, b, o = string.match(ARGV[4], '^(%d+):(%d+):(%d+)$')
  if not a then return redis.error_reply('INVALID cursor: malformed') end
  src, sub, off = tonumber(a), tonumber(b), tonumber(o)
  -- Offsets past any index orq keeps (and past what ZRANGE accepts as an integer).
  if sub > CURSOR_MAX or off > CURSOR_MAX then return redis.error_reply('INVALID cursor: malformed') end
  if src < first or src > last then return redis.error_reply('INVALID cursor: does not belong to this status') end
end

-- The key of the index at (src, sub), or nil when src's sub-indexes are exhausted. The ready
-- lists' sub-index is 10 x (the tenant's rank, 0 with a tenant filter) + (9 - priority).
local function index_key(s, u)
  if SOURCES[s][1] then
    if u == 0 then return SOURCES[s][1] end
    return nil
  end
  local rank, p = math.floor(u / 10), 9 - u % 10
  if tenant ~= '' then
    if rank == 0 then return ready_key(c, tenant, p) end
    return nil
  end
  local name = redis.call('ZRANGE', c.K_KNOWN, rank, rank)
  if #name == 0 then return nil end
  return ready_key(c, name[1], p)
end

-- The ids of `key` from rank `from` to `to` (reversed when `rev`); none when `key` holds
-- another type than the source's (a ready list of foreign data is skipped).
local function index_range(key, from, to, rev, list)
  local cmd = 'ZRANGE'
  if list then cmd = 'LRANGE' elseif rev then cmd = 'ZREVRANGE' end
  local ids = redis.pcall(cmd, key, from, to)
  if ids.err then return {} end
  return ids
end

local out = {}
local scanned = 0
local CHUNK = 100
while #out < limit and scanned < scan and src <= last do
  local key = index_key(src, sub)
  if not key then
    src, sub, off = src + 1, 0, 0
  else
    local want = math.min(CHUNK, scan - scanned)
    local ids = index_range(key, off, off + want - 1, SOURCES[src][2], not SOURCES[src][1])
    if #ids == 0 then
      -- An empty index (most of a tenant's ten ready lists) counts as one entry examined, so a
      -- page over many idle tenants stays bounded by `scan`.
      sub, off = sub + 1, 0
      scanned = scanned + 1
    else
      for i = 1, #ids do
        local id = ids[i]
        scanned = scanned + 1
        off = off + 1
        local t = fields(c, id, LIST_FIELDS) or {}
        local want_status = SOURCES[src][3]
        if status ~= '' then want_status = {[status] = true} end
        if t.status and want_status[t.status] and (tenant == '' or t.tenant == tenant)
            and (ttype == '' or t.type == ttype) then
          out[#out + 1] = task_view(c, id)
          if #out >= limit then break end
        end
      end
    end
  end
end

local cursor = ''
if src <= last then
  cursor = istr(src) .. ':' .. istr(sub) .. ':' .. istr(off)
end
return {now, out, cursor}
