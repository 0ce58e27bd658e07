-- Release a Redlock on one master, only if the caller still holds it there.
-- KEYS[1] lock key        KEYS[2] released tokens (list, newest first)
-- ARGV[1] owner token
-- returns 1 released (now, or by an earlier run of this call), 0 not the owner here
--         (expired, never granted, or taken by another)
--
-- Idempotent for its token: the last 16 released tokens are kept 5 minutes, so a replay
-- whose first run released answers 1 again.
if redis.call('get', KEYS[1]) == ARGV[1] then
  redis.call('del', KEYS[1])
  redis.call('lpush', KEYS[2], ARGV[1])
  redis.call('ltrim', KEYS[2], 0, 15)
  redis.call('pexpire', KEYS[2], 300000)
  return 1
end
for _, gone in ipairs(redis.call('lrange', KEYS[2], 0, -1)) do
  if gone == ARGV[1] then
    return 1
  end
end
return 0
