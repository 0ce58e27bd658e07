-- Take a lock if it is free (or handed off to the caller's process), and number this hold;
-- otherwise queue the caller's process to be woken.
-- KEYS[1] lock key        KEYS[2] fence counter        KEYS[3] waiting processes (zset)
-- KEYS[4] wake-up throttle (see lock_release.lua): cleared once the woken process acquires
-- KEYS[5] queue marker: set with every queueing, as long-lived as the queue, so that a
--         release that finds no marker knows without a look at the queue that nobody waits
-- KEYS[6] grants (hash): waiter id -> "<token> <ttl ms>" of the process's waiting head, for
--         a release to grant the lock to it (lock_release.lua)
-- ARGV[1] owner token     ARGV[2] ttl in milliseconds
-- ARGV[3] waiter id of the caller's process, or "" to try without queueing
-- ARGV[4] how long the queue may sit unused before it expires (ms)
-- ARGV[5] the caller's place in the queue from an earlier try (server ms), or ""
-- ARGV[6] "1" if the caller's process may already be queued (then a success dequeues it)
-- ARGV[7] "1" if the lock may be granted to the caller while it waits (it then registers
--         its token and ttl in KEYS[6] when it queues)
-- A try that neither queues nor may be queued passes KEYS[1..2] and ARGV[1..2] only (fewer
-- arguments to send and to unpack: most acquisitions find the lock free).
-- returns {1, fence}        acquired; fence is strictly greater than every earlier hold's
--         {1, fence, pttl}  the key already held the caller's token (a replay, or a grant
--                           made while the caller waited): pttl is what is left of it
--         {0, pttl, place}  held by another; pttl is its remaining time in ms (-1: no
--                           expiry); place is the caller's queue position ("" unqueued)
--
-- Idempotent for its token: a replay (redis-py retrying a call whose reply was lost) finds
-- the key holding the caller's own token and answers {1, the same fence, what is left of
-- the lease} again, changing nothing but the queue; the counter has moved only by this
-- hold's INCR since, as nobody else can be granted while the key holds the token. A try
-- made after a release granted the lock to the caller (lock_release.lua) answers the same.
--
-- Fences survive the loss of their counter (eviction, FLUSHALL, failover to an empty
-- replica): a counter that is gone restarts from the server's clock in microseconds since
-- the epoch, above every fence an earlier counter issued as long as that counter averaged
-- under 10^6 fences a second and the server's clock did not step back across the loss
-- (docs/fences.md). Values stay below 2^53, exact as Lua numbers, until the year 2255.
-- A counter expires max(1 day, 10 ttls) after it was made (INCR keeps that expiry, so an
-- acquisition costs no PEXPIRE): names no longer used leave nothing behind, and a name in
-- use restarts from the clock once a day, above every fence it issued before.
redis.replicate_commands()
local waiter = ARGV[3] or ''
local taken = redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
if not taken then
  local current = redis.call('get', KEYS[1])
  if current == ARGV[1] then
    if ARGV[6] == '1' then
      redis.call('zrem', KEYS[3], waiter)
      redis.call('hdel', KEYS[6], waiter)
    end
    -- The counter may be gone since (evicted): the hold is numbered anew, from the clock.
    local fence = tonumber(redis.call('get', KEYS[2])) or next_fence(KEYS[2], ARGV[2])
    return {1, fence, redis.call('pttl', KEYS[1])}
  elseif waiter ~= '' and current == 'handoff:' .. waiter then
    taken = redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  end
end
if taken then
  if ARGV[6] == '1' then
    redis.call('zrem', KEYS[3], waiter)
    if ARGV[7] == '1' then
      redis.call('hdel', KEYS[6], waiter)
    end
    if redis.call('get', KEYS[4]) == waiter then
      redis.call('del', KEYS[4])
    end
  end
  return {1, next_fence(KEYS[2], ARGV[2])}
end
local place = ''
if waiter ~= '' then
  place = ARGV[5]
  if place == '' then
    local now = redis.call('time')
    place = tostring(now[1] * 1000 + math.floor(now[2] / 1000))
  end
  -- NX: a process already queued keeps its place.
  redis.call('zadd', KEYS[3], 'NX', place, waiter)
  redis.call('pexpire', KEYS[3], ARGV[4])
  redis.call('set', KEYS[5], '1', 'PX', ARGV[4])
  if ARGV[7] == '1' then
    redis.call('hset', KEYS[6], waiter, ARGV[1] .. ' ' .. ARGV[2])
    redis.call('pexpire', KEYS[6], ARGV[4])
  end
end
return {0, redis.call('pttl', KEYS[1]), place}
