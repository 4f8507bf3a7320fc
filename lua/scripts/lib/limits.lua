-- lib/limits.lua: tenants' rate limits. Provides bucket_tokens (a tenant's token bucket at a time).
-- Needs: format
-- Per-call state: none.

local bucket_tokens
do
  -- A tenant's rate-limit tokens at `now` (token bucket refilled at rate_per_s, capped at burst),
  -- and its rate; nil when the tenant has no rate limit. `th` holds the tenant's hash fields.
  -- A clock that stepped back refills nothing (and takes nothing away).
  function bucket_tokens(th, now)
    local rate = num(th.rate_per_s, 0)
    if rate <= 0 then
      return nil, nil
    end
    local burst = num(th.burst, 1)
    local tokens = num(th.tokens, nil)
    local at = num(th.tokens_at, nil)
    if not tokens or not at then
      return burst, rate
    end
    if now > at then
      tokens = tokens + (now - at) * rate / 1000
    end
    if tokens > burst then
      tokens = burst
    end
    return tokens, rate
  end
end
