-- Look items up in a Bloom filter kept as a bitmap: each item is k bit offsets.
-- KEYS[1] the bitmap (string)
-- KEYS[2] its signature: hashing scheme, bits and hashes the bitmap was built with
-- ARGV[1] the caller's signature     ARGV[2] k, offsets per item     ARGV[3] m, bits
-- ARGV[4] per item, its first offset x and step y (both < m <= 2^32) as little-endian
--         uint32s, x1 y1 x2 y2 ...; an item's k offsets are x, then x = (x + y) % m and
--         y = (y + i) % m after the i-th (seawall.bloom._arithmetic.positions)
-- returns {1, flag per item, in order}: flag 1 when all the item's bits are set (maybe
--              present), 0 when one is not (surely absent);
--         {0, stored signature}: the filter was built with other sizing;
--         {2}: the bitmap or its signature is gone without the other (evicted or
--              deleted by hand), so the filter has lost items;
--         {3}: neither key exists: the filter was never created (create()), or was lost
--              whole (FLUSHALL, eviction, failover to an empty replica); never read as
--              empty, which would answer "absent" for every item it held
local stored = redis.call('get', KEYS[2])
local exists = redis.call('exists', KEYS[1])
if stored and stored ~= ARGV[1] then
  return {0, stored}
end
if not stored and exists == 0 then
  return {3}
end
if not stored or exists == 0 then
  return {2}
end
local k = tonumber(ARGV[2])
local m = tonumber(ARGV[3])
local reply = {1}
local starts = ARGV[4]
for at = 1, #starts, 8 do
  local found = 1
  local x, y = struct.unpack('<I4I4', starts, at)
  for i = 1, k do
    if redis.call('getbit', KEYS[1], x) == 0 then
      found = 0
      break
    end
    x = (x + y) % m
    y = (y + i) % m
  end
  reply[#reply + 1] = found
end
return reply
