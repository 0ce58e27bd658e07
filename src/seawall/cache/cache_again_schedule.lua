-- Record second deletes (Cache.delete(key, again_after=...)) before the first delete runs.
-- KEYS[1] the namespace's schedule: a sorted set, key text -> due time (server ms)
-- ARGV[1] delay (ms)
-- ARGV[2] the namespace's channel for scheduled deletes ("seawall:again:<namespace>")
-- ARGV[3] head of the announcement, "<sender>:a:": the delay is appended
-- ARGV[4..] key texts
-- returns the due time (server ms)
--
-- Written before the first delete, so a caller that dies right after still gets its second
-- delete: every process with a Cache of the namespace open hears the announcement and
-- looks at the schedule once it is due (nobody polls an empty schedule). A key scheduled
-- again takes the later due time, which covers both windows (a fill after the first
-- delete lives no longer than the later second delete). The server's clock is the only
-- clock: processes' clocks never matter. A replay schedules a little later: harmless.
redis.replicate_commands()
local now = redis.call('time')
local due = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + tonumber(ARGV[1])
for i = 4, #ARGV do
  redis.call('zadd', KEYS[1], due, ARGV[i])
end
redis.call('publish', ARGV[2], ARGV[3] .. ARGV[1])
return due
