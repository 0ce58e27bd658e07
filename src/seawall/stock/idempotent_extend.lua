-- Renew a running claim's lease, only if it is still the caller's.
-- KEYS[1] the message's record
-- ARGV[1] claimant's token   ARGV[2] lease (ms)
-- returns 1 renewed, 0 the claim is gone or another's (the lease ran out)
if redis.call('hget', KEYS[1], 'state') == 'running'
    and redis.call('hget', KEYS[1], 'token') == ARGV[1] then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0
