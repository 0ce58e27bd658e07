-- Release the write lock, only if the caller still holds it. Readers that waited are
-- admitted ahead of waiting writers and all woken (so writers cannot starve readers);
-- with no reader waiting, one waiting writer is woken.
-- KEYS[1] writer key      KEYS[2] waiting writers (zset: process id -> intent expiry ms)
-- KEYS[3] waiting readers (zset: process id -> expiry ms)
-- KEYS[4] readers admitted past waiting writers (set of process ids)
-- ARGV[1] writer token    ARGV[2] prefix of the waiters' wake-up channels
-- ARGV[3] the readers' wake-up key      ARGV[4] the writers' wake-up key
-- ARGV[5] how long admitted readers may hold writers back (ms)
-- KEYS[5] this token's release record   ARGV[6] how long it lasts at least (ms)
-- returns 1 released (now, or by an earlier run of this call), 0 not the holder (lease
--         lost; nothing is touched)
--
-- Idempotent for its token: as lock_release.lua, a release leaves a record of its token
-- (ARGV[6] long), so a replay whose first run released answers 1 again.
redis.replicate_commands()
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return redis.call('exists', KEYS[5])
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], '1', 'PX', ARGV[6])
local t = redis.call('time')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
-- Live entries only (each is scored by its expiry; the dead are purged when a waiter
-- queues): the readers waiting now, else the writer that refreshed its intent last.
local readers = redis.call('zrangebyscore', KEYS[3], '(' .. now, '+inf')
if readers[1] then
  for _, id in ipairs(readers) do
    redis.call('sadd', KEYS[4], id)
    redis.call('publish', ARGV[2] .. id, ARGV[3])
  end
  redis.call('pexpire', KEYS[4], ARGV[5])
  return 1
end
-- The writer that refreshed its intent last: a writer that died while waiting has
-- the oldest refresh, so a wake-up is not lost on it.
local head = redis.call('zrevrangebyscore', KEYS[2], '+inf', '(' .. now, 'LIMIT', 0, 1)
if head[1] then
  redis.call('publish', ARGV[2] .. head[1], ARGV[4])
end
return 1
