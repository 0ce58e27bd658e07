-- Set the units on sale in total; what orders hold stays theirs.
-- KEYS[1] units on sale in total (string int)   KEYS[2] units available (string int)
-- KEYS[3] units taken, not cancelled (string int)
-- KEYS[4] orders (hash: order id -> qty taken, or "c<qty>" once cancelled)
-- ARGV[1] units on sale (decimal integer >= 0)
-- ARGV[2] "1": recount the units taken from the orders hash, "0": trust KEYS[3]
-- returns {1, 0} set: on sale = ARGV[1], available = ARGV[1] - taken
--         {-1, taken} ARGV[1] is below the units taken; nothing changed
--         {-2, orders} KEYS[3] is missing while the orders hash records this many
--                      orders: the counter was lost (eviction, a partial restore), and
--                      rebuilding from 0 would sell the held units again; nothing changed
local taken = redis.call('get', KEYS[3])
if ARGV[2] == '1' then
  local sum = 0
  for _, value in ipairs(redis.call('hvals', KEYS[4])) do
    if string.sub(value, 1, 1) ~= 'c' then
      sum = sum + tonumber(value)
    end
  end
  -- %.0f, not tostring: Lua would write 1e+15, which DECRBY refuses.
  taken = string.format('%.0f', sum)
elseif not taken then
  -- A take always leaves the counter behind (a cancel leaves "0"), so orders without
  -- it mean it was lost. Only this rare path pays for the HLEN.
  local orders = redis.call('hlen', KEYS[4])
  if orders > 0 then
    return {-2, orders}
  end
  taken = '0'
end
if tonumber(ARGV[1]) < tonumber(taken) then
  return {-1, tonumber(taken)}
end
redis.call('set', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], ARGV[1])
redis.call('decrby', KEYS[2], taken)
redis.call('set', KEYS[3], taken)
return {1, 0}
