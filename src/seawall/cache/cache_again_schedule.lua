-- Record second deletes (Cache.delete(key, again_after=...)) before the first delete runs.
-- KEYS[1] the namespace's schedule: a sorted set, key text -> due time (server ms)
-- ARGV[1] delay (ms)
-- ARGV[2..] key texts
-- returns the due time (server ms)
--
-- Written before the first delete, so a caller that dies right after still gets its second
-- delete: every process with a Cache of the namespace open carries out due ones. A key
-- scheduled again takes the later due time, which covers both windows (a fill after the
-- first delete lives no longer than the later second delete). The server's clock is the
-- only clock: processes' clocks never matter. A replay schedules a little later: harmless.
redis.replicate_commands()
local now = redis.call('time')
local due = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('zadd', KEYS[1], due, ARGV[i])
end
return due
