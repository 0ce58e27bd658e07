-- Take a permit of a semaphore if one is free and no process queued earlier wants it;
-- otherwise queue the caller's process (first come, first served) to be woken.
-- KEYS[1] holders (zset: token -> lease end, server ms)     KEYS[2] fence counter
-- KEYS[3] waiting processes (zset: id -> arrival, server ms)
-- KEYS[4] the same ids -> when they count as gone unless they try again (server ms)
-- ARGV[1] holder token     ARGV[2] number of permits     ARGV[3] ttl in milliseconds
-- ARGV[4] waiter id of the caller's process, or "" to try without queueing
-- ARGV[5] how long a queued process counts as waiting after a try (ms)
-- ARGV[6] how long the queue may sit unused before it expires (ms)
-- ARGV[7] the caller's place in the queue from an earlier try (server ms), or ""
-- A try without a waiter id passes ARGV[1..3] only.
-- returns {1, fence}        acquired; fence is strictly greater than every earlier one's
--         {0, wait, place}  not acquired; wait: ms until a lease or a waiter lapses by
--                           itself (-1: none will); place: the caller's queue position
--
-- Time is the server's: leases of processes whose clocks disagree stay comparable, and a
-- lease ends when the server says so whatever the holder's clock shows (a step of the
-- server's clock moves every lease end with it: docs/semaphore.md, "Clocks").
--
-- Idempotent for its token: a replay (redis-py retrying a call whose reply was lost) finds
-- the token holding a live permit and answers {1, fence} again, however full the
-- semaphore is by then; one that finds a permit free takes it again (ZADD of a member it
-- holds: its lease starts anew, and it still holds one permit). That fence is a fresh one
-- (no fence is kept per holder): it is greater than the one whose reply was lost, which
-- nobody saw, so "strictly greater than every earlier one" still holds. The replay check
-- comes only where a first try would be refused: an uncontended try does not pay for it.
--
-- Fences survive the loss of their counter: see lock_acquire.lua and docs/fences.md. The
-- counter expires max(1 day, 10 ttls) after it was made, as a Lock's.
redis.replicate_commands()
-- A lease ends 1 ms after now + ttl: `now` is TIME cut to the ms, up to 1 ms before this
-- call, and a lease counts as over once `now` reaches its end (ZREMRANGEBYSCORE up to now
-- inclusive), so without the extra ms it could end up to 1 ms before ttl had passed since
-- the call, while its holder, counting from its send, still held it.
local now = redis.call('time')
now = now[1] * 1000 + math.floor(now[2] / 1000)
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
local waiter = ARGV[4] or ''
local queued = redis.call('zcard', KEYS[3])
if queued > 0 then
  -- A queued process that stopped trying (killed, paused) must not block the queue.
  local gone = redis.call('zrangebyscore', KEYS[4], '-inf', now)
  for _, id in ipairs(gone) do
    redis.call('zrem', KEYS[3], id)
    redis.call('zrem', KEYS[4], id)
  end
  if #gone > 0 then
    queued = redis.call('zcard', KEYS[3])
  end
end
local place = ARGV[7] or ''
local held = redis.call('zcard', KEYS[1])
local free = tonumber(ARGV[2]) - held
if free > 0 then
  local ahead = false
  if waiter ~= '' and queued > 0 then
    ahead = redis.call('zrank', KEYS[3], waiter)
  end
  if not ahead then
    if place ~= '' and queued > 0 then
      ahead = redis.call('zcount', KEYS[3], '-inf', '(' .. place)
    else
      ahead = queued
    end
  end
  if ahead < free then
    local lease = now + tonumber(ARGV[3]) + 1
    redis.call('zadd', KEYS[1], lease, ARGV[1])
    -- The key lives as long as its longest lease, so dead holders leave nothing behind
    -- (a first holder's is the only one: no look at the others).
    if held > 0 then
      lease = redis.call('zrange', KEYS[1], -1, -1, 'WITHSCORES')[2]
    end
    redis.call('pexpireat', KEYS[1], lease)
    if waiter ~= '' and queued > 0 then
      redis.call('zrem', KEYS[3], waiter)
      redis.call('zrem', KEYS[4], waiter)
    end
    return {1, next_fence(KEYS[2], ARGV[3])}
  end
end
if redis.call('zscore', KEYS[1], ARGV[1]) then
  -- A replay whose first run took a permit (the permits may be all taken since, or
  -- others queued): it holds one.
  if waiter ~= '' then
    redis.call('zrem', KEYS[3], waiter)
    redis.call('zrem', KEYS[4], waiter)
  end
  return {1, next_fence(KEYS[2], ARGV[3])}
end
if waiter ~= '' then
  if place == '' then
    place = tostring(now)
  end
  -- NX: a process already queued keeps its place.
  redis.call('zadd', KEYS[3], 'NX', place, waiter)
  redis.call('zadd', KEYS[4], now + tonumber(ARGV[5]), waiter)
  redis.call('pexpire', KEYS[3], ARGV[6])
  redis.call('pexpire', KEYS[4], ARGV[6])
end
local wait = -1
local lease = redis.call('zrange', KEYS[1], 0, 0, 'WITHSCORES')
if lease[2] then
  wait = tonumber(lease[2]) - now
end
local lapse = redis.call('zrange', KEYS[4], 0, 0, 'WITHSCORES')
if lapse[2] and (wait < 0 or tonumber(lapse[2]) - now < wait) then
  wait = tonumber(lapse[2]) - now
end
return {0, wait, place}
