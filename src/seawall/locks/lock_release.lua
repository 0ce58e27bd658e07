-- Release a lock, only if the caller still holds it, and wake a waiting process.
-- KEYS[1] lock key        KEYS[2] waiting processes (zset)
-- KEYS[3] wake-up throttle: the id of the process woken moments ago
-- KEYS[4] this token's release record: what makes a replay of this call idempotent
-- KEYS[5] queue marker (see lock_acquire.lua): absent, nobody is queued
-- ARGV[1] owner token     ARGV[2] prefix of the waiters' wake-up channels
-- ARGV[3] starving: a waiter queued this long (ms) gets the lock handed to it
-- ARGV[4] how long a hand-off is reserved for its waiter (ms)
-- ARGV[5] wake-up throttle (ms): a process is not woken again within this period
-- ARGV[6] how long the release record must last (ms), or "" when the lease left will do
-- returns 1 released (now, or by an earlier run of this call), 0 not the owner (lease
--         lost; nothing is touched)
--
-- A plain release lets anyone take the lock next, the releaser included: that keeps a busy
-- lock fast. The process waiting longest is woken, but not again within the throttle
-- period: a woken waiter that lost the race looks again by itself after that period, and
-- waking it sooner would only make it try in vain. Once it has waited past
-- the starving threshold, the lock is handed to it instead (a reservation only it can
-- take, which expires if it died), which bounds every wait.
--
-- Idempotent for its token: the lock key is renamed to the token's release record, so the
-- record keeps what is left of the lease (ARGV[6] lengthens it when too little is left,
-- the caller knows: longer than redis-py's retries of one call), and a replay whose first
-- run released finds it and answers 1 again, while a token whose lease lapsed (never
-- released by its owner) still answers 0, whoever took the lock since. Uncontended (no
-- queue marker), a release is one MGET and one RENAME.
redis.replicate_commands()
local function remember()
  if ARGV[6] ~= '' then
    redis.call('pexpire', KEYS[4], ARGV[6])
  end
  return 1
end
local state = redis.call('mget', KEYS[1], KEYS[5])
if state[1] ~= ARGV[1] then
  return redis.call('exists', KEYS[4])
end
if not state[2] then
  redis.call('rename', KEYS[1], KEYS[4])
  return remember()
end
local head = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES')
if head[1] == nil then
  redis.call('del', KEYS[5])
  redis.call('rename', KEYS[1], KEYS[4])
  return remember()
end
local now = redis.call('time')
local now_ms = now[1] * 1000 + math.floor(now[2] / 1000)
if now_ms - tonumber(head[2]) >= tonumber(ARGV[3]) then
  redis.call('zrem', KEYS[2], head[1])
  local left = redis.call('pttl', KEYS[1])
  redis.call('set', KEYS[1], 'handoff:' .. head[1], 'PX', ARGV[4])
  redis.call('set', KEYS[4], ARGV[1], 'PX', math.max(left, 1))
  redis.call('publish', ARGV[2] .. head[1], KEYS[1])
  return remember()
end
redis.call('rename', KEYS[1], KEYS[4])
if redis.call('get', KEYS[3]) ~= head[1] then
  redis.call('set', KEYS[3], head[1], 'PX', ARGV[5])
  redis.call('publish', ARGV[2] .. head[1], KEYS[1])
end
return remember()
