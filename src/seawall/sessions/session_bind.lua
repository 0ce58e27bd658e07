-- Record a session in its user's index, for "log out everywhere".
-- KEYS[1] the user's index (set of session handles: "<tag>.<digest>")
-- ARGV[1] the session's handle   ARGV[2] absolute lifetime of a session, ms
-- returns 1. The index lives as long as its newest session can; handles of sessions
-- that ended meanwhile stay until then and cost a DEL of a missing key at logout.
redis.call('sadd', KEYS[1], ARGV[1])
redis.call('pexpire', KEYS[1], tonumber(ARGV[2]))
return 1
