-- Release a lock, only if the caller still holds it, and tell waiters.
-- KEYS[1] lock key
-- ARGV[1] owner token        ARGV[2] release channel
-- returns 1 released, 0 not the owner (lease lost; the key is left untouched)
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('publish', ARGV[2], '1')
  return 1
end
return 0
