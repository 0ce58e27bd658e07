-- End every session in a user's index, as one step: a save that indexes a session runs
-- wholly before it (the session is ended) or wholly after it (a login after the logout).
-- KEYS[1] the user's index (set of session handles "<tag>.<digest>")
-- KEYS[2..] the hashes of the handles in ARGV, in the same order (same hash tag: a bound
--           session has its user's tag)
-- ARGV the handles the index held when the caller read it (SMEMBERS)
-- returns the number of sessions ended, or -1 when the index changed since the caller
--         read it (nothing done: read it again)
if redis.call('scard', KEYS[1]) ~= #ARGV then
  return -1
end
for i = 1, #ARGV do
  if redis.call('sismember', KEYS[1], ARGV[i]) == 0 then
    return -1
  end
end
local ended = 0
for i = 2, #KEYS do
  ended = ended + redis.call('del', KEYS[i])
end
redis.call('del', KEYS[1])
return ended
