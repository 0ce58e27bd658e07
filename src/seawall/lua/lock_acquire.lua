-- Take a lock if it is free (or handed off to the caller's process), and number this hold;
-- otherwise queue the caller's process to be woken.
-- KEYS[1] lock key        KEYS[2] fence counter        KEYS[3] waiting processes (zset)
-- KEYS[4] wake-up throttle (see lock_release.lua): cleared once the woken process acquires
-- ARGV[1] owner token     ARGV[2] ttl in milliseconds
-- ARGV[3] waiter id of the caller's process, or "" to try without queueing
-- ARGV[4] how long the queue may sit unused before it expires (ms)
-- ARGV[5] the caller's place in the queue from an earlier try (server ms), or ""
-- ARGV[6] "1" if the caller's process may already be queued (then a success dequeues it)
-- returns {1, fence}        acquired; fence is strictly greater than every earlier hold's
--         {0, pttl, place}  held by another; pttl is its remaining time in ms (-1: no
--                           expiry); place is the caller's queue position ("" unqueued)
local waiter = ARGV[3]
local taken = redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])
if not taken and waiter ~= '' and redis.call('get', KEYS[1]) == 'handoff:' .. waiter then
  taken = redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
if taken then
  if ARGV[6] == '1' then
    redis.call('zrem', KEYS[3], waiter)
    if redis.call('get', KEYS[4]) == waiter then
      redis.call('del', KEYS[4])
    end
  end
  return {1, redis.call('incr', KEYS[2])}
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
end
return {0, redis.call('pttl', KEYS[1]), place}
