-- Release a lock, only if the caller still holds it, and wake a waiting process.
-- KEYS[1] lock key        KEYS[2] waiting processes (zset)
-- KEYS[3] wake-up throttle: the id of the process woken moments ago
-- KEYS[4] this token's release record: what makes a replay of this call idempotent
-- KEYS[5] queue marker (see lock_acquire.lua): absent, nobody is queued
-- KEYS[6] grants (see lock_acquire.lua)   KEYS[7] fence counter
-- ARGV[1] owner token     ARGV[2] prefix of the waiters' wake-up channels
-- ARGV[3] starving: a waiter queued this long (ms) gets the lock handed to it
-- ARGV[4] how long a hand-off is reserved for its waiter (ms)
-- ARGV[5] wake-up throttle (ms): a process is not woken again within this period
-- ARGV[6] how long the release record must last (ms), or "" when the lease left will do
-- ARGV[7] a waiter id, or "": a waiter giving up drops its process's grant registration
--         if that still names this token, so no later release grants the lock to it
-- Trailing "" arguments may be left out (fewer to send: a release usually has two).
-- returns 1 released (now, or by an earlier run of this call), 0 not the owner (lease
--         lost; nothing is touched)
--
-- A plain release lets anyone take the lock next, the releaser included: that keeps a busy
-- lock fast. The process waiting longest is woken, but not again within the throttle
-- period: a woken waiter that lost the race looks again by itself after that period, and
-- waking it sooner would only make it try in vain. Once it has waited past
-- the starving threshold, the lock is handed to it instead, which bounds every wait:
-- granted outright to its waiting head's token and ttl (registered by its last try) and
-- numbered, as an acquire would, when its process still listens for wake-ups (a connection
-- subscribes to its own channel: PUBSUB NUMSUB, which counts no pattern subscriber; a
-- process that died has closed its connection), so the woken process holds it without a
-- try; else reserved for it (a key only it can take, which expires if it died). A head
-- registered for a grant whose process no longer listens is dropped, the next one woken.
--
-- Idempotent for its token: the lock key is renamed to the token's release record, so the
-- record keeps what is left of the lease (ARGV[6] lengthens it when too little is left,
-- the caller knows: longer than redis-py's retries of one call), and a replay whose first
-- run released finds it and answers 1 again, while a token whose lease lapsed (never
-- released by its owner) still answers 0, whoever took the lock since. Uncontended (no
-- queue marker), a release is one MGET and one RENAME.
redis.replicate_commands()
local function remember()
  if ARGV[6] and ARGV[6] ~= '' then
    redis.call('pexpire', KEYS[4], ARGV[6])
  end
  return 1
end
if ARGV[7] and ARGV[7] ~= '' then
  local grant = redis.call('hget', KEYS[6], ARGV[7])
  if grant and string.sub(grant, 1, #ARGV[1] + 1) == ARGV[1] .. ' ' then
    redis.call('hdel', KEYS[6], ARGV[7])
  end
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
  redis.call('set', KEYS[4], ARGV[1], 'PX', math.max(left, 1))
  local grant = redis.call('hget', KEYS[6], head[1])
  if not grant then
    redis.call('set', KEYS[1], 'handoff:' .. head[1], 'PX', ARGV[4])
    redis.call('publish', ARGV[2] .. head[1], KEYS[1])
    return remember()
  end
  redis.call('hdel', KEYS[6], head[1])
  local channel = ARGV[2] .. head[1]
  if redis.call('pubsub', 'numsub', channel)[2] > 0 then
    local space = string.find(grant, ' ', 1, true)
    local token, ttl = string.sub(grant, 1, space - 1), string.sub(grant, space + 1)
    local fence = next_fence(KEYS[7], ttl)
    redis.call('set', KEYS[1], token, 'PX', ttl)
    redis.call('publish', channel, '=' .. string.format('%d', fence) .. ':' .. token .. ':' .. KEYS[1])
    return remember()
  end
  redis.call('del', KEYS[1])
  head = redis.call('zrange', KEYS[2], 0, 0)
  if head[1] == nil then
    return remember()
  end
else
  redis.call('rename', KEYS[1], KEYS[4])
end
if redis.call('get', KEYS[3]) ~= head[1] then
  redis.call('set', KEYS[3], head[1], 'PX', ARGV[5])
  redis.call('publish', ARGV[2] .. head[1], KEYS[1])
end
return remember()
