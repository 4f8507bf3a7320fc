-- lib/args.lua: argument checks made before a script's first write (Redis does not roll back).
-- Provides arg_int, arg_num (a value in a range, or an INVALID message), opt_int, opt_num (the
-- same, or a default for '') and require_args (the named leading ARGV are present).
-- Needs: format
-- Per-call state: none.

local arg_int, arg_num, opt_int, opt_num, require_args
do
  -- Parse ARGV[i] as an integer in [lo, hi]; on failure return nil and an INVALID message.
  function arg_int(v, name, lo, hi)
    local n = tonumber(v)
    if n == nil or n ~= math.floor(n) or n < lo or n > hi then
      return nil, 'INVALID ' .. name .. ' must be an integer in [' .. istr(lo) .. ', ' .. istr(hi) .. ']'
    end
    return n
  end

  function arg_num(v, name, lo, hi)
    local n = tonumber(v)
    if n == nil or n ~= n or n < lo or n > hi then
      return nil, 'INVALID ' .. name .. ' must be a number in [' .. fstr(lo) .. ', ' .. fstr(hi) .. ']'
    end
    return n
  end

  -- `v` as arg_int / arg_num read it, or `default` when it is '' (a setting left at its default
  -- costs no parsing).
  function opt_int(v, default, name, lo, hi)
    if v == '' then return default end
    return arg_int(v, name, lo, hi)
  end

  function opt_num(v, default, name, lo, hi)
    if v == '' then return default end
    return arg_num(v, name, lo, hi)
  end

  -- An INVALID error reply naming the first of `names` whose ARGV value is missing or empty, or
  -- nil when all are present (scripts validate before they write: Redis does not roll back).
  function require_args(ARGV, names)
    for i = 1, #names do
      if ARGV[i] == nil or ARGV[i] == '' then
        return redis.error_reply('INVALID ' .. names[i] .. ' is required')
      end
    end
    return nil
  end
end
