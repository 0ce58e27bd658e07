-- Write many cache entries, each as cache_store.lua writes one (no versions), and publish
-- one invalidation message for them all. Runs after cache_write.lua (write_entry).
-- KEYS[4i-3], KEYS[4i-2], KEYS[4i-1], KEYS[4i] entry i: value, load lease, waiting
--         processes, hit marker (KEYS[1] to KEYS[4] of cache_store.lua)
-- ARGV[1] lease token of the loader of every entry ("" = explicit sets, which void any lease)
-- ARGV[2] duration of the load (ms)
-- ARGV[3] prefix of the waiters' wake-up channels
-- ARGV[4] invalidation channel ("" = publish nothing: a load replaces only what was
--         missing or stale, which no process holds in memory)
-- ARGV[5] invalidation message (drop all these keys from every process's memory)
-- ARGV[6] largest payload (bytes) a wake-up carries
-- ARGV[7] lead (ms): see cache_store.lua
-- ARGV[5+3i], ARGV[6+3i], ARGV[7+3i] entry i: payload ("" = absent), ttl of the entry (ms),
--         stale window (ms)
-- returns a list: per entry 1 written (now, or by an earlier run of this call) or 0 not
--         written (its lease was voided or taken over), as cache_store.lua answers
--
-- One call for a batch saves a script run, a reply and an invalidation message per entry.
-- Every key is in KEYS: on Cluster a call takes entries of one hash slot only.
local wake_limit = tonumber(ARGV[6])
local lead = tonumber(ARGV[7])
local written = {}
for i = 1, #KEYS / 4 do
  local payload, ttl, stale = ARGV[5 + 3 * i], ARGV[6 + 3 * i], ARGV[7 + 3 * i]
  local entry = stale .. ':' .. ARGV[2] .. ':' .. payload
  written[i] = write_entry(KEYS[4 * i - 3], KEYS[4 * i - 2], KEYS[4 * i - 1], KEYS[4 * i],
                           ARGV[1], entry, payload, ttl, stale, ARGV[3], wake_limit, lead)
end
if ARGV[4] ~= '' then
  redis.call('publish', ARGV[4], ARGV[5])
end
return written
