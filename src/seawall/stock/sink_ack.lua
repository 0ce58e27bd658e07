-- Acknowledge log entries an OrderSink has committed to SQL, and delete them if asked.
-- KEYS[1] the stock's log stream
-- ARGV[1] consumer group
-- ARGV[2] "1" to delete the acknowledged entries (the group is the log's only reader)
-- ARGV[3..] entry ids
-- returns the number of entries acknowledged
--
-- One script, so an entry is never deleted without its acknowledgement or the reverse.
-- Ids go in slices: unpack() of thousands of values would overflow Lua's C stack.
local acked = 0
local slice = 500
for first = 3, #ARGV, slice do
  local last = math.min(first + slice - 1, #ARGV)
  acked = acked + redis.call('xack', KEYS[1], ARGV[1], unpack(ARGV, first, last))
  if ARGV[2] == '1' then
    redis.call('xdel', KEYS[1], unpack(ARGV, first, last))
  end
end
return acked
