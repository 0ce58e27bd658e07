-- Record how many times the owner of a reentrant lock holds it, only if it still does.
-- KEYS[1] lock key (holds the owner's token, as for seawall.Lock)
-- KEYS[2] hold counts (hash: owner token -> times held), present only while re-entered
-- ARGV[1] owner token        ARGV[2] the owner's hold count after this step (>= 1)
-- returns 1 recorded, 0 not the owner (lease lost; nothing is touched)
--
-- The count is set, not incremented: the client knows it, and a step retried after a lost
-- reply must not count twice. A count of 1 drops the entry, so the final release (the
-- plain lock release, which wakes waiters) leaves no key behind.
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
if tonumber(ARGV[2]) <= 1 then
  redis.call('del', KEYS[2])
  return 1
end
redis.call('hset', KEYS[2], ARGV[1], ARGV[2])
-- Same lifetime as the lease: a holder that dies leaves nothing behind.
local pttl = redis.call('pttl', KEYS[1])
if pttl > 0 then
  redis.call('pexpire', KEYS[2], pttl)
end
return 1
