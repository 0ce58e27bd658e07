-- Set the units on sale in total; what orders hold stays theirs.
-- KEYS[1] units on sale in total (string int)   KEYS[2] units available (string int)
-- KEYS[3] units taken, not cancelled (string int)
-- ARGV[1] units on sale (decimal integer >= 0)
-- returns {1, 0} set: on sale = ARGV[1], available = ARGV[1] - taken
--         {-1, taken} ARGV[1] is below the units taken; nothing changed
local taken = redis.call('get', KEYS[3]) or '0'
if tonumber(ARGV[1]) < tonumber(taken) then
  return {-1, tonumber(taken)}
end
redis.call('set', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], ARGV[1])
redis.call('decrby', KEYS[2], taken)
redis.call('set', KEYS[3], taken)
return {1, 0}
