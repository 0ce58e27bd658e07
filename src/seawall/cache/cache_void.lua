-- Delete a cache entry (voiding any load in flight), or give a load lease back.
-- KEYS[1] value     KEYS[2] load lease     KEYS[3] waiting processes (set of ids)
-- KEYS[4] hit marker
-- KEYS[5] (optional) the entry's version: a delete with a version leaves it as a tombstone
-- ARGV[1] "" to delete the entry and void the lease; else the token of a lease to give
--         back (its load failed), which is dropped only if still current
-- ARGV[2] prefix of the waiters' wake-up channels
-- ARGV[3] invalidation channel (a delete publishes there; a give-back passes "")
-- ARGV[4] invalidation message (drop this key from every process's memory)
-- ARGV[5] (with KEYS[5]) the delete's version, a decimal integer
-- ARGV[6] (with KEYS[5]) how long the tombstone lives (ms)
-- returns 1 done, 0 the lease was not the caller's any more, or a newer version is stored
--         (nothing touched)
--
-- Versions are compared as decimal integers of any size (length, then digits), so a
-- change-log position beyond 2^53 compares exactly. A versioned delete stands when its
-- version is >= the stored one and leaves that version behind: a write of an older version
-- can never bring the entry back. A replayed versioned delete finds its own version and
-- deletes again, which changes nothing.
--
-- A delete removes the value and its hit marker with the lease in one step: a plain read
-- (MGET of value and hit marker) never returns a value older than a completed delete.
--
-- Waiters are woken either way (the message carries no value: they read again); one of
-- them takes a new lease and loads.
local function older(a, b)
  if #a ~= #b then
    return #a < #b
  end
  return a < b
end
if ARGV[1] == '' then
  if KEYS[5] then
    local stored = redis.call('get', KEYS[5])
    if stored and older(ARGV[5], stored) then
      return 0
    end
    redis.call('set', KEYS[5], ARGV[5], 'PX', ARGV[6])
  end
  redis.call('del', KEYS[1], KEYS[2], KEYS[4])
  if ARGV[3] ~= '' then
    redis.call('publish', ARGV[3], ARGV[4])
  end
elseif redis.call('get', KEYS[2]) == ARGV[1] then
  redis.call('del', KEYS[2])
else
  return 0
end
local waiting = redis.call('smembers', KEYS[3])
local wake = string.format('%d:%s', #KEYS[1], KEYS[1])
for _, id in ipairs(waiting) do
  redis.call('publish', ARGV[2] .. id, wake)
end
if #waiting > 0 then
  redis.call('del', KEYS[3])
end
return 1
