-- Claim second deletes that are due, so that exactly one process carries out each.
-- KEYS[1] the namespace's schedule (sorted set, key text -> due time in server ms)
-- ARGV[1] the most keys to claim
-- ARGV[2] claim (ms): a claimed key is due again this much later, so a claimant that
--         dies before finishing is taken over
-- returns {claim score, ms until the next due key (-1: none left), key, key, ...}
--
-- A claimed key's score becomes the claim score; cache_again_done removes only keys still
-- at that score, so a key scheduled again meanwhile keeps its new schedule. A replayed
-- claim finds the keys already claimed (not due): they are carried out when the claim
-- runs out, late but never lost.
redis.replicate_commands()
local now = redis.call('time')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local due = redis.call('zrangebyscore', KEYS[1], '-inf', ms, 'LIMIT', 0, tonumber(ARGV[1]))
local claim = ms + tonumber(ARGV[2])
local reply = {claim, -1}
for _, key in ipairs(due) do
  redis.call('zadd', KEYS[1], 'XX', claim, key)
  reply[#reply + 1] = key
end
local first = redis.call('zrange', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] then
  reply[2] = math.max(0, tonumber(first[2]) - ms)
end
return reply
