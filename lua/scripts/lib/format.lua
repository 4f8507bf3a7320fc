-- lib/format.lua: numbers in and out. Provides now_ms (the store's clock), istr (an integer as a
-- decimal string), fstr (a float that round-trips), num (a stored value as a finite number or a
-- default), truncate, and MEMO_MAX (the bound of the pure memos kept across calls).
-- Needs: nothing
-- Per-call state: none. Kept across calls: istr's memo (pure, bounded by MEMO_MAX).

local now_ms, istr, fstr, num, truncate, MEMO_MAX
do
  -- The store's clock in integer milliseconds since the Unix epoch.
  function now_ms()
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end

  -- Most entries a memo of a pure function keeps: a full memo starts again empty. Such a memo
  -- is the one state a lib file keeps beyond a call (bounded, and its answers never change).
  MEMO_MAX = 4096

  -- An integer as a decimal string (tostring would print large numbers in exponent form).
  -- Memoised (pure, bounded): string.format costs Redis about 1,650 instructions (callgrind), a
  -- table lookup a tenth of that, and a call formats its `now` and small counters many times.
  local istr_memo, istr_n = {}, 0
  function istr(x)
    local s = istr_memo[x]
    if s == nil then
      s = string.format('%d', x)
      -- NaN cannot be a table key (and never equals itself).
      if x == x then
        if istr_n >= MEMO_MAX then istr_memo, istr_n = {}, 0 end
        istr_memo[x] = s
        istr_n = istr_n + 1
      end
    end
    return s
  end

  -- A float as a string that round-trips exactly.
  function fstr(x)
    return string.format('%.17g', x)
  end

  -- `v` as a finite number, or `default` when it is absent, not a number, NaN or infinite (a
  -- stored field read back: garbage reads as the default instead of spreading).
  function num(v, default)
    local n = tonumber(v)
    if n == nil or n ~= n or n == math.huge or n == -math.huge then
      return default
    end
    return n
  end

  function truncate(s, n)
    if string.len(s) > n then
      return string.sub(s, 1, n)
    end
    return s
  end
end
