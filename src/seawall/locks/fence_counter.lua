-- A prelude (seawall.shared._scripts.with_prelude) of the scripts that number holds.
-- next_fence(counter, ttl_ms): the next fence, INCRed. A counter that was gone (INCR made
-- it: evicted, FLUSHALL, a failover to an empty replica, or expired) restarts from the
-- server's clock in microseconds since the epoch, above every fence it issued before
-- unless the clock stepped back (docs/fences.md), and expires max(1 day, 10 ttls) after it
-- was made (INCR keeps that expiry, so numbering a hold costs no PEXPIRE).
local function next_fence(counter, ttl_ms)
  local fence = redis.call('incr', counter)
  if fence == 1 then
    local now = redis.call('time')
    local floor = now[1] .. string.format('%06d', now[2])
    redis.call('set', counter, floor, 'PX', math.max(86400000, 10 * tonumber(ttl_ms)))
    fence = tonumber(floor)
  end
  return fence
end
