-- get_or_set's write-back: store what the callable returned, under the caller's lease,
-- give the lease back and wake the waiting processes.
-- KEYS[1] the value     KEYS[2] load lease     KEYS[3] waiting processes (set of ids)
-- KEYS[4] (optional) the stale copy: written with the value, to live ARGV[7] ms
-- ARGV[1] the loader's lease token
-- ARGV[2] "1" to store ARGV[3] (a value), "0" to store nothing (the callable failed, or
--         the timeout was 0): the lease is given back and the waiters look again
-- ARGV[3] the value, as Django's RedisCache stores it
-- ARGV[4] time to live, ms ("" = for ever)
-- ARGV[5] prefix of the waiters' wake-up channels
-- ARGV[6] the wake-up message (names the lease, which waiters watch)
-- ARGV[7] (with KEYS[4]) the stale copy's time to live, ms: the value's and stale_ttl
-- returns 1 stored, 0 not stored: the lease was voided (a delete came after the load
--         started, so its value may be older than the delete) or ran out and was taken by
--         another loader, or a value was set meanwhile (kept: it is newer), or ARGV[2] "0"
--
-- The waiters are woken in every case where the lease was ours: a failed load hands the
-- lease to the next caller, which runs the callable itself.
if redis.call('get', KEYS[2]) ~= ARGV[1] then
  return 0
end
local stored = 0
if ARGV[2] == '1' then
  local done
  if ARGV[4] == '' then
    done = redis.call('set', KEYS[1], ARGV[3], 'NX')
  else
    done = redis.call('set', KEYS[1], ARGV[3], 'NX', 'PX', ARGV[4])
  end
  if done then
    stored = 1
    if KEYS[4] then
      redis.call('set', KEYS[4], ARGV[3], 'PX', ARGV[7])
    end
  end
end
local waiting = redis.call('smembers', KEYS[3])
redis.call('del', KEYS[2], KEYS[3])
for _, id in ipairs(waiting) do
  redis.call('publish', ARGV[5] .. id, ARGV[6])
end
return stored
