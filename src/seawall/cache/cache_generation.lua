-- Move a cache namespace to a new generation (clear()), or restore one found lost.
-- KEYS[1] the namespace's generation, a decimal integer (absent: 0, never cleared)
-- ARGV[1] "" to clear; else the highest generation the caller has seen (decimal): restore
--         it if the stored one is below (the key was lost, or a failover took it back),
--         else change nothing
-- ARGV[2] the namespace's clear channel ("seawall:cleared:<namespace>")
-- ARGV[3] head of the message every process's listener gets, "<sender>:c:": the new
--         generation is appended (a listener then drops its L1 copies of the namespace
--         and names entries with that generation from then on)
-- returns {generation now current as a decimal string, 1 if this call started it, else 0
--         (a restore that found the key in place: the caller read a lagging copy)}
--
-- Entry keys carry the generation, so a new one names a fresh, empty set of entries: one
-- INCR clears the whole namespace. The old entries are left to expire by their ttl.
--
-- A generation is never issued twice, even when its key is lost (eviction, a DEL,
-- FLUSHALL, a failover to a replica without it): an absent key restarts from the server's
-- clock in microseconds since the epoch, above every generation an earlier key issued as
-- long as those averaged under 10^6 clears a second and the clock did not step back (as
-- fence counters do, see lock_acquire.lua). A restore also starts above the caller's
-- highest generation. Values stay below 2^53, exact as Lua numbers, until the year 2255;
-- they are compared as strings (length, then digits) and never formatted from a number.
-- The key has no ttl: see docs/eviction.md.
redis.replicate_commands()
local function below(a, b)
  if #a ~= #b then
    return #a < #b
  end
  return a < b
end
local function from_clock()
  local now = redis.call('time')
  return now[1] .. string.format('%06d', now[2])
end
local stored = redis.call('get', KEYS[1])
local generation
if ARGV[1] == '' then
  if stored and string.match(stored, '^[1-9]%d*$') then
    redis.call('incr', KEYS[1])
    generation = redis.call('get', KEYS[1])
  else
    generation = from_clock()
  end
else
  if stored and string.match(stored, '^[1-9]%d*$') and not below(stored, ARGV[1]) then
    return {stored, 0}
  end
  redis.call('set', KEYS[1], ARGV[1])
  redis.call('incr', KEYS[1])
  generation = redis.call('get', KEYS[1])
  local clock = from_clock()
  if below(generation, clock) then
    generation = clock
  end
end
redis.call('set', KEYS[1], generation)
redis.call('publish', ARGV[2], ARGV[3] .. generation)
return {generation, 1}
