-- Move a change-log follower's checkpoint, unless a newer follower has taken over.
-- KEYS[1] checkpoint hash (fields "position", "fence" and, if given, "server")
-- ARGV[1] the writer's fence (its election lock's fence, a positive integer below 2^53)
-- ARGV[2] position (opaque text: an LSN, a GTID set, "file:offset")
-- ARGV[3] optional: the server the position was read from (its election name), kept with
--         a copy of the checkpoint under the source's address (see _follower.py)
-- returns 1 written, 0 refused: a follower with a newer fence has written
--
-- Unlike fenced_write, the same fence may write again and again: one elected follower
-- moves its checkpoint forward many times per hold. A deposed follower's fence is below
-- its successor's, and the successor writes once as soon as it is elected (claiming the
-- checkpoint), so the deposed one can never move the checkpoint afterwards.
local current = tonumber(redis.call('hget', KEYS[1], 'fence') or '0')
local fence = tonumber(ARGV[1])
if fence < current then
  return 0
end
if ARGV[3] then
  redis.call('hset', KEYS[1], 'position', ARGV[2], 'fence', ARGV[1], 'server', ARGV[3])
else
  redis.call('hset', KEYS[1], 'position', ARGV[2], 'fence', ARGV[1])
end
return 1
