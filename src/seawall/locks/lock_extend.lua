-- Extend a lock's lease, only if the caller still holds it.
-- KEYS[1] lock key
-- ARGV[1] owner token        ARGV[2] new ttl in milliseconds
-- returns 1 extended, 0 not the owner
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0
