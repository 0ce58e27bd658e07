-- One consistent snapshot of a stock's books, for reconciling them with SQL.
-- KEYS[1] units on sale, KEYS[2] units available, KEYS[3] orders hash
-- returns {on sale or false, available or false, {order id, value, order id, value, ...}}
--
-- Atomic, so no take or cancel lands between the three reads.
return {
  redis.call('get', KEYS[1]),
  redis.call('get', KEYS[2]),
  redis.call('hgetall', KEYS[3]),
}
