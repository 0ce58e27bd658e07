-- Prepended to cache_store.lua, cache_store_many.lua and cache_void.lua on one server: run
-- the script only if the entries' keys name the namespace's current generation (see
-- Cache.clear()).
-- KEYS[#KEYS] the namespace's generation key, taken off KEYS before the script runs
-- ARGV[#ARGV] the generation the entry's keys name (decimal), taken off ARGV likewise
-- returns {generation} (decimal; "0" for an absent key, or one holding no generation)
--         without touching anything when the key holds another generation; else what
--         the script returns (an integer, or a list of integers: never a string)
--
-- So a write or delete from a process that has not yet heard of a clear cannot miss the
-- new generation: it is refused, and made again under the one returned, in the same
-- script call as the check. One server only: the generation key has its own hash tag,
-- so on Cluster it is on another slot, and the caller reads it before writing instead.
local generation_key = table.remove(KEYS)
local named_generation = table.remove(ARGV)
local current_generation = redis.call('get', generation_key)
if not current_generation or not string.match(current_generation, '^[1-9]%d*$') then
  current_generation = '0'
end
if current_generation ~= named_generation then
  return {current_generation}
end
