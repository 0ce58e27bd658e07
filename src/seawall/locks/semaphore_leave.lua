-- Take a process off a semaphore's queue and wake the new oldest waiter: the leaving
-- process either gave up waiting (so a permit it might have taken goes to the next) or
-- was woken for a permit after its last waiter left (so the wake-up is passed on).
-- KEYS[1] holders        KEYS[2] waiting processes (zset: id -> arrival)
-- KEYS[3] the same ids -> lapse time
-- ARGV[1] prefix of the waiters' wake-up channels        ARGV[2] the leaving process's id
-- returns 1 a waiter was woken, 0 nobody waits
redis.call('zrem', KEYS[2], ARGV[2])
redis.call('zrem', KEYS[3], ARGV[2])
local head = redis.call('zrange', KEYS[2], 0, 0)
if head[1] then
  redis.call('publish', ARGV[1] .. head[1], KEYS[1])
  return 1
end
return 0
