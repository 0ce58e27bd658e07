-- Give back exactly what one order took, once.
-- KEYS[1] units available (string int)   KEYS[2] units taken, not cancelled (string int)
-- KEYS[3] orders (hash: order id -> qty taken, or "c<qty>" once cancelled)
-- KEYS[4] order log (stream)
-- ARGV[1] order id
-- returns {1, qty} given back now (logged: op=cancel, order, qty)
--         {0, 0} unknown order; nothing changed
--         {-1, 0} cancelled before; nothing changed
-- The order stays in the hash as "c<qty>" so a late retry of its take cannot take again.
local recorded = redis.call('hget', KEYS[3], ARGV[1])
if not recorded then
  return {0, 0}
end
if string.sub(recorded, 1, 1) == 'c' then
  return {-1, 0}
end
redis.call('incrby', KEYS[1], recorded)
redis.call('decrby', KEYS[2], recorded)
redis.call('hset', KEYS[3], ARGV[1], 'c' .. recorded)
redis.call('xadd', KEYS[4], '*', 'op', 'cancel', 'order', ARGV[1], 'qty', recorded)
return {1, tonumber(recorded)}
