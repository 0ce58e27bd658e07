-- Prelude of cache_store.lua and cache_store_many.lua: write_entry() writes one cache entry
-- under its load lease (or unconditionally) and wakes the processes waiting for it.
-- value, lease, waiters, hit: the entry's keys (KEYS[1] to KEYS[4] of cache_store.lua)
-- token: the loader's lease token ("" = an explicit set, which voids any lease)
-- entry: what the value key holds, "<stale window ms>:<load ms>:<payload>"
-- payload, ttl, stale: the payload, ttl of the entry (ms), its stale window (ms)
-- wake_prefix, wake_limit, lead: ARGV[6], ARGV[9] (a number) and ARGV[10] (a number) of
--   cache_store.lua
-- returns 1 written (now, or by an earlier run of this call: then nothing is done again),
--         0 not written: the lease is not the token's (see cache_store.lua)
local function write_entry(value, lease, waiters, hit, token, entry, payload, ttl, stale,
                           wake_prefix, wake_limit, lead)
  if token ~= '' and redis.call('get', lease) ~= token then
    if redis.call('get', value) == entry then
      return 1
    end
    return 0
  end
  local fresh = tonumber(ttl) - tonumber(stale)
  redis.call('set', value, entry, 'PX', ttl)
  -- The waiters are read first, so that one DEL drops the lease and their set together.
  local waiting = redis.call('smembers', waiters)
  if fresh > lead then
    redis.call('del', lease, waiters)
    redis.call('set', hit, string.format('%d', lead), 'PX', fresh - lead)
  else
    redis.call('del', lease, waiters, hit)
  end
  local wake = string.format('%d:%s', #value, value)
  if token ~= '' and #payload <= wake_limit then
    wake = wake .. token .. ':' .. string.format('%d', fresh) .. ':' .. payload
  end
  for _, id in ipairs(waiting) do
    redis.call('publish', wake_prefix .. id, wake)
  end
  return 1
end
