-- Record a handler's outcome (or give the claim up) and wake the duplicates waiting on it.
-- KEYS[1] the message's record   KEYS[2] its wake-up list (BLPOP)
-- ARGV[1] claimant's token
-- ARGV[2] "done" to record ARGV[3] as the outcome, "abandon" to give the claim up
-- ARGV[3] outcome (JSON)         ARGV[4] how long to keep the record / wake-ups (ms)
-- returns 1 done (now, or by an earlier run of this call), 0 nothing changed (another
--         claimant's outcome is already recorded, or the claim to abandon is no longer ours)
--
-- The record stores how many duplicates wait; each gets its own wake-up token, so all of
-- them wake at once. Tokens of waiters that gave up meanwhile expire with the list.
--
-- Idempotent for its token: a replayed "done" finds the outcome recorded under the
-- caller's own token and answers 1 again (the waiters were woken by the first run). A
-- replayed "abandon" finds the record gone and answers 0, which the caller ignores.
local state = redis.call('hget', KEYS[1], 'state')
if state == 'done' then
  if ARGV[2] == 'done' and redis.call('hget', KEYS[1], 'token') == ARGV[1] then
    return 1
  end
  return 0
end
local waiters = tonumber(redis.call('hget', KEYS[1], 'waiters') or '0')
if ARGV[2] == 'done' then
  -- Recorded even if our lease ran out and another claimant runs now: the handler did
  -- run, and the first outcome recorded is the one every delivery returns.
  -- Rewritten whole: the waiters' marks (w:<token>) go with the count.
  redis.call('del', KEYS[1])
  redis.call('hset', KEYS[1], 'state', 'done', 'token', ARGV[1], 'outcome', ARGV[3])
  redis.call('pexpire', KEYS[1], ARGV[4])
elseif redis.call('hget', KEYS[1], 'token') == ARGV[1] then
  redis.call('del', KEYS[1])
else
  return 0
end
redis.call('del', KEYS[2])
for _ = 1, math.min(waiters, 1000) do
  redis.call('rpush', KEYS[2], '1')
end
if waiters > 0 then
  redis.call('pexpire', KEYS[2], ARGV[4])
end
return 1
