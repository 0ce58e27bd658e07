-- Take units for one order, at most once per order id: check, decrement, record and log
-- in one step, so no two buyers can both see the last unit.
-- KEYS[1] units available (string int)   KEYS[2] units taken, not cancelled (string int)
-- KEYS[3] orders (hash: order id -> qty taken, or "c<qty>" once cancelled)
-- KEYS[4] order log (stream)   KEYS[5] units on sale in total (string int)
-- ARGV[1] order id   ARGV[2] qty (decimal integer >= 1)
-- returns 1 taken now (logged: op=take, order, qty)
--         2 this order took the same qty before: a retry, nothing taken again
--         0 not enough units available now; nothing changed
--         -1 this order was cancelled: it never takes again
--         {-2, on sale} qty exceeds the units on sale in total; nothing changed
--         {-3, qty taken before} this order took a different qty before; nothing changed
-- The common answers are bare integers: a reply cheaper to parse than an array.
local qty = tonumber(ARGV[2])
local available = tonumber(redis.call('get', KEYS[1]) or '0')
-- HSETNX both checks that the order never took and records it: one command, not two.
if available >= qty and redis.call('hsetnx', KEYS[3], ARGV[1], ARGV[2]) == 1 then
  -- Counters change by the caller's decimal string: no Lua number is ever written back.
  redis.call('decrby', KEYS[1], ARGV[2])
  redis.call('incrby', KEYS[2], ARGV[2])
  redis.call('xadd', KEYS[4], '*', 'op', 'take', 'order', ARGV[1], 'qty', ARGV[2])
  return 1
end
local recorded = redis.call('hget', KEYS[3], ARGV[1])
if recorded then
  if string.sub(recorded, 1, 1) == 'c' then
    return -1
  end
  if recorded == ARGV[2] then
    return 2
  end
  return {-3, tonumber(recorded)}
end
-- Only a take that found too few units pays for this read: it tells "sold out" from
-- "can never be sold".
local on_sale = tonumber(redis.call('get', KEYS[5]) or '0')
if qty > on_sale then
  return {-2, on_sale}
end
return 0
