-- Tag cache entries: add their keys to a tag's set, which lives at least as long as they do.
-- KEYS[1] the tag's set of entry keys (the user's key texts)
-- ARGV[1] ms the set must live at least (the longest lifetime of the entries added)
-- ARGV[2..] entry key texts
-- returns the number of entries newly added
--
-- The set outlives its entries, so delete_tag finds every entry that may still be read;
-- an entry deleted or expired meanwhile stays a member until the tag is deleted, or the
-- set expires once no entry was tagged with it for that long.
local added = redis.call('sadd', KEYS[1], unpack(ARGV, 2))
local pttl = redis.call('pttl', KEYS[1])
if pttl < tonumber(ARGV[1]) then
  redis.call('pexpire', KEYS[1], ARGV[1])
end
return added
