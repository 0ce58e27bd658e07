-- Raise this master's fence counter to a hold's fence, while the caller holds the lock here.
-- (A hold's fence is the highest counter among the masters that granted it; a majority
-- must be at least that high so that every later hold's fence is higher.)
-- KEYS[1] lock key        KEYS[2] fence counter of the lock name on this master
-- ARGV[1] owner token     ARGV[2] the hold's fence
-- returns 1 the counter is at least the fence, 0 the caller does not hold the lock here
--
-- Idempotent: raising to the same fence twice leaves the counter where the first run did.
-- The counter keeps the expiry its grant gave it (a day if it had none).
if redis.call('get', KEYS[1]) ~= ARGV[1] then
  return 0
end
if tonumber(ARGV[2]) > tonumber(redis.call('get', KEYS[2]) or '0') then
  local keep = redis.call('pttl', KEYS[2])
  if keep <= 0 then
    keep = 86400000
  end
  redis.call('set', KEYS[2], ARGV[2], 'PX', keep)
end
return 1
