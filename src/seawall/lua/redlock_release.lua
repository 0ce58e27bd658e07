-- Release a Redlock on one master, only if the caller still holds it there.
-- KEYS[1] lock key
-- ARGV[1] owner token
-- returns 1 released, 0 not the owner here (expired, never granted, or taken by another)
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  return 1
end
return 0
