-- Claim a message for its handler, or say why not.
-- KEYS[1] the message's record (hash: state "running" or "done", token, outcome, waiters)
-- ARGV[1] claimant's token   ARGV[2] lease (ms)
-- returns {"done", outcome}       the handler already ran; its recorded outcome
--         {"running", pttl (ms)}  another claimant runs it; the caller is counted as a
--                                 waiter (once per token, however often it looks
--                                 again), to be woken when it finishes or gives up
--         {"claimed"}             the caller runs it now, under a lease of ARGV[2] ms
--
-- A claimant that dies stops renewing its lease; the record then expires and the next
-- claim takes over.
--
-- Idempotent for its token: a replay (redis-py retrying a call whose reply was lost) finds
-- the claim running under the caller's own token and answers {"claimed"} again (renewing
-- the lease), so the caller runs the handler instead of waiting out its own lease.
local record = redis.call('hmget', KEYS[1], 'state', 'token')
local state = record[1]
if state == 'done' then
  return {'done', redis.call('hget', KEYS[1], 'outcome')}
end
if state == 'running' and record[2] == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {'claimed'}
end
if state == 'running' then
  if redis.call('hsetnx', KEYS[1], 'w:' .. ARGV[1], 1) == 1 then
    redis.call('hincrby', KEYS[1], 'waiters', 1)
  end
  return {'running', redis.call('pttl', KEYS[1])}
end
redis.call('hset', KEYS[1], 'state', 'running', 'token', ARGV[1], 'waiters', 0)
redis.call('pexpire', KEYS[1], ARGV[2])
return {'claimed'}
