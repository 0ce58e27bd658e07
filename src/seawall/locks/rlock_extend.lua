-- Extend a reentrant lock's lease and its hold count's, only if the caller still holds
-- it: set it to ARGV[2] ms, or (ARGV[3] "1") add ARGV[2] ms to what is left of it (read
-- here, in the server's time).
-- KEYS[1] lock key        KEYS[2] hold counts (hash; may be absent: held once)
-- ARGV[1] owner token     ARGV[2] milliseconds        ARGV[3] "1" to add, "" to set
-- returns the new lease in milliseconds (>= 1), 0 not the owner
redis.replicate_commands()
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
local ttl = tonumber(ARGV[2])
if ARGV[3] == '1' then
  ttl = math.max(redis.call('pttl', KEYS[1]), 0) + ttl
end
redis.call('pexpire', KEYS[1], ttl)
redis.call('pexpire', KEYS[2], ttl)
return ttl
