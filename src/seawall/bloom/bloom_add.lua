-- Add items to a Bloom filter kept as a bitmap: each item is k bit offsets.
-- KEYS[1] the bitmap (string)
-- KEYS[2] its signature: hashing scheme, bits and hashes the bitmap was built with
-- ARGV[1] the caller's signature     ARGV[2] k, offsets per item     ARGV[3] m, bits
-- ARGV[4] per item, its first offset x and step y (both < m <= 2^32) as little-endian
--         uint32s, x1 y1 x2 y2 ...; an item's k offsets are x, then x = (x + y) % m and
--         y = (y + i) % m after the i-th (seawall.bloom._arithmetic.positions)
-- ARGV[5] "1": create the filter if it does not exist (create(), clear()); otherwise a
--         missing filter is refused, never silently started anew
-- returns {1, flag per item, in order}: flag 1 when one of the item's bits was still 0
--              (a new item);
--         {0, stored signature}: the filter was built with other sizing, nothing written;
--         {2}: the bitmap or its signature is gone without the other (evicted or
--              deleted by hand), so the filter has lost items, nothing written
--         {3}: neither key exists and ARGV[5] is not "1": the filter was never created,
--              or was lost whole (FLUSHALL, eviction, failover to an empty replica)
--         {4}: created now (ARGV[5] "1", no items given)
--
-- The signature guards against false negatives: another size or scheme would look for an
-- item's bits in other places. Creation writes it together with a one-byte bitmap, so a
-- filter that exists always has both keys: either one alone means the filter is damaged,
-- neither means it is missing. An add never creates a filter: one recreated by the next add
-- after a loss would hold only the items added since, and answer "absent" for the rest.
local stored = redis.call('get', KEYS[2])
local exists = redis.call('exists', KEYS[1])
if stored then
  if stored ~= ARGV[1] then
    return {0, stored}
  end
  if exists == 0 then
    return {2}
  end
elseif exists == 1 then
  return {2}
elseif ARGV[5] == '1' then
  redis.call('set', KEYS[2], ARGV[1])
  redis.call('setbit', KEYS[1], 0, 0)
  if ARGV[4] == '' then
    return {4}
  end
else
  return {3}
end
local k = tonumber(ARGV[2])
local m = tonumber(ARGV[3])
local reply = {1}
local starts = ARGV[4]
for at = 1, #starts, 8 do
  local new = 0
  local x, y = struct.unpack('<I4I4', starts, at)
  for i = 1, k do
    if redis.call('setbit', KEYS[1], x, 1) == 0 then
      new = 1
    end
    x = (x + y) % m
    y = (y + i) % m
  end
  reply[#reply + 1] = new
end
return reply
