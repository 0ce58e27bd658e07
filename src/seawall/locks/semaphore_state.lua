-- Read a semaphore's state by the server's clock; changes nothing.
-- KEYS[1] holders (zset: token -> lease end, server ms)
-- ARGV[1] a holder token, or ""
-- returns {live holders, ms left on the token's lease (-1: it holds no permit)}
redis.replicate_commands()
local now = redis.call('time')
now = now[1] * 1000 + math.floor(now[2] / 1000)
local live = redis.call('zcount', KEYS[1], '(' .. now, '+inf')
local left = -1
if ARGV[1] ~= '' then
  local lease = redis.call('zscore', KEYS[1], ARGV[1])
  if lease and tonumber(lease) > now then
    left = tonumber(lease) - now
  end
end
return {live, left}
