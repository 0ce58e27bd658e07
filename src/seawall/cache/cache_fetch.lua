-- Read a cache entry, or take the lease to (re)load it: one round trip on every miss.
-- KEYS[1] value: "<stale window ms>:<last load ms>:<payload>" (payload "" = absent),
--         expiring at the end of the stale window
-- KEYS[2] load lease: the token of the caller elected to load
-- KEYS[3] waiting processes (set of ids) to wake when a value lands
-- KEYS[4] hit marker (not read here: a fresh hit reads it with the value, without a script)
-- ARGV[1] token for a lease this call takes
-- ARGV[2] lease ms (0: only read, never take a lease)
-- ARGV[3] id of the calling process's wake-up channel ("" = do not queue it)
-- ARGV[4] "1" to treat a fresh value as stale (an early refresh)
-- returns {1, payload, fresh ms, load ms}  fresh value (fresh ms: time left before stale)
--         {2, payload, fresh ms, load ms, ttl ms}  stale value; the caller took the lease
--                                                  to refresh (ttl ms: left before the
--                                                  value's real expiry)
--         {3, payload, fresh ms, load ms, ttl ms}  stale value; someone else refreshes it
--         {4}                              miss; the caller took the lease to load
--         {5, lease pttl, lease token}     miss; someone else loads (caller queued by ARGV[3])
--
-- The token in {5} lets a queued waiter trust a value carried by its wake-up: only the
-- write-back under that very lease sends it, and a delete voids the lease first.
--
-- An entry is stale once its remaining ttl is within its stale window, so the logical
-- expiry needs no clock of the client's and stays right when the entry's ttl changes.
--
-- Idempotent for its token: a replay (redis-py retrying a call whose reply was lost) finds
-- the lease holding the caller's token and answers as the first run did ({2} or {4}: the
-- caller loads), never {5}, which would have it wait out its own lease.
--
-- A queued waiter's call runs 7 commands (GET, SET NX, GET, SADD, PEXPIRE, PTTL and the
-- EVALSHA itself): the lease's holder, read once by take(), is the token {5} returns.
local holder = false
local function take()
  if ARGV[2] == '0' then
    return false
  end
  if redis.call('set', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return true
  end
  holder = redis.call('get', KEYS[2])
  return holder == ARGV[1]
end
local stored = redis.call('get', KEYS[1])
if stored then
  local stale, took, at = string.match(stored, '^(%d+):(%d+):()')
  local payload = string.sub(stored, at or 1)
  took = tonumber(took or '0')
  local pttl = redis.call('pttl', KEYS[1])
  local fresh = pttl - tonumber(stale or '0')
  if pttl < 0 then
    fresh = 2147483647
  end
  if fresh > 0 and ARGV[4] ~= '1' then
    return {1, payload, fresh, took}
  end
  if take() then
    return {2, payload, fresh, took, pttl}
  end
  return {3, payload, fresh, took, pttl}
end
if take() then
  return {4}
end
if ARGV[3] ~= '' and ARGV[2] ~= '0' then
  redis.call('sadd', KEYS[3], ARGV[3])
  redis.call('pexpire', KEYS[3], ARGV[2])
end
if ARGV[2] == '0' then
  holder = redis.call('get', KEYS[2])  -- a plain read took no lease: read the holder here
end
return {5, redis.call('pttl', KEYS[2]), holder or ''}
