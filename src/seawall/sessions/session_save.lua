-- Write what one request changed in a session: only its fields, so parallel requests of
-- one user that touch different fields both keep their writes. The session's entry in its
-- user's index (for logout_everywhere) changes in the same step, so a logout never misses
-- a session saved at the same moment.
-- KEYS[1] the session's hash (the id the request came with, or a new one)
-- KEYS[2] the hash of the session's new id when it is regenerated (same hash tag), else
--         KEYS[1]
-- KEYS[3] optional: the index of the session's user (a set of "<tag>.<digest>" handles,
--         same hash tag: a bound session has its user's tag)
-- ARGV[1] mode: "new"     KEYS[1] is a fresh id: create it
--               "update"  apply the fields below to the existing session (none: only
--                         check it lives and record that its cookie was sent)
--               "reset"   clear() then set: replace every field, keep the id and its age
--               "regen"   move the session to KEYS[2] with exactly the fields below; the
--                         old id is deleted in the same step (login: session fixation)
--               "delete"  drop the session
--               "retire"  drop the session if it lives (its data moves to another slot,
--                         written by a "new" next); {0} if it had ended
-- ARGV[2] sliding lifetime, ms   ARGV[3] absolute lifetime, ms
-- ARGV[4] size limit, bytes (sum of name and value lengths of the "d:" fields)
-- ARGV[5] n: the number of field/value pairs that follow; then n pairs to set; then the
--         names of the fields to remove; then, when KEYS[3] is given, a handle to add to
--         it and one to remove from it ("" for none)
-- returns {1} written ("m:issued" records when, the response carrying the cookie)
--         {0} the session no longer exists (expired, logged out everywhere, regenerated
--             by a parallel request): nothing written, so an ended session never returns
--         {-1, field, size} the session would hold `size` bytes, over the limit; `field`
--             is its largest field; nothing written
local mode = ARGV[1]
local max_age = tonumber(ARGV[2])
local lifetime = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local n = tonumber(ARGV[5])
local last, add, remove = #ARGV, '', ''
if #KEYS >= 3 then
  add, remove, last = ARGV[#ARGV - 1], ARGV[#ARGV], #ARGV - 2
end
local time = redis.call('time')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local function index()
  if remove ~= '' then
    redis.call('srem', KEYS[3], remove)
  end
  if add ~= '' then
    redis.call('sadd', KEYS[3], add)
    -- The index lives as long as its newest session can; handles of sessions that
    -- ended meanwhile stay until then and cost a DEL of a missing key at logout.
    redis.call('pexpire', KEYS[3], lifetime)
  end
end

if mode == 'delete' then
  redis.call('del', KEYS[1])
  index()
  return {1}
end
if mode == 'retire' then
  local stored = tonumber(redis.call('hget', KEYS[1], 'm:created'))
  if stored == nil or stored + lifetime <= now then
    return {0}
  end
  redis.call('del', KEYS[1])
  index()
  return {1}
end

local created = now
local target = KEYS[1]
local current = {}
if mode == 'update' or mode == 'reset' or mode == 'regen' then
  local fields = redis.call('hgetall', KEYS[1])
  for i = 1, #fields, 2 do
    current[fields[i]] = fields[i + 1]
  end
  local stored = tonumber(current['m:created'])
  if stored == nil or stored + lifetime <= now then
    return {0}
  end
  if mode ~= 'regen' then
    created = stored
  end
end
if mode == 'reset' or mode == 'regen' then
  current = {}
end
if mode == 'regen' then
  target = KEYS[2]
end

local changed = {}
for i = 0, n - 1 do
  local field = ARGV[6 + 2 * i]
  local value = ARGV[7 + 2 * i]
  current[field] = value
  changed[#changed + 1] = field
  changed[#changed + 1] = value
end
local removed = {}
for i = 6 + 2 * n, last do
  if current[ARGV[i]] ~= nil then
    current[ARGV[i]] = nil
    removed[#removed + 1] = ARGV[i]
  end
end

-- The size of the result, counting what parallel requests stored meanwhile.
local size, largest, largest_size = 0, '', -1
for field, value in pairs(current) do
  if string.sub(field, 1, 2) == 'd:' then
    local this = #field - 2 + #value
    size = size + this
    if this > largest_size then
      largest, largest_size = string.sub(field, 3), this
    end
  end
end
if size > limit then
  return {-1, largest, size}
end

if mode == 'reset' or mode == 'regen' then
  redis.call('del', KEYS[1])
end
-- In slices: unpack() of a whole large session would overflow Lua's C stack.
for i = 1, #changed, 1000 do
  redis.call('hset', target, unpack(changed, i, math.min(i + 999, #changed)))
end
for i = 1, #removed, 1000 do
  redis.call('hdel', target, unpack(removed, i, math.min(i + 999, #removed)))
end
redis.call('hset', target, 'm:created', string.format('%.0f', created),
  'm:issued', string.format('%.0f', now))
redis.call('pexpire', target, math.min(max_age, created + lifetime - now))
index()
return {1}
