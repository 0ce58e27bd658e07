-- Load a session and slide its expiry, in one round trip.
-- KEYS[1] the session's hash: "m:created" (ms, server clock), "m:user" (optional),
--         "d:<name>" -> serialized value
-- ARGV[1] sliding lifetime, ms (max_age)   ARGV[2] absolute lifetime, ms
-- returns the hash as a flat array {field, value, ...} and the session's expiry slid to
--         min(max_age, what is left of the absolute lifetime); {} when there is no such
--         session (never created, expired, logged out) or it outlived its absolute
--         lifetime (then it is deleted here)
local fields = redis.call('hgetall', KEYS[1])
if #fields == 0 then
  return fields
end
local created
for i = 1, #fields, 2 do
  if fields[i] == 'm:created' then
    created = tonumber(fields[i + 1])
    break
  end
end
if created == nil then
  -- Not a session seawall wrote: never hand it out, never touch it.
  return {}
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local left = created + tonumber(ARGV[2]) - now
if left <= 0 then
  redis.call('del', KEYS[1])
  return {}
end
redis.call('pexpire', KEYS[1], math.min(tonumber(ARGV[1]), left))
return fields
