-- Remove second deletes that were carried out, unless scheduled again meanwhile.
-- KEYS[1] the namespace's schedule (sorted set, key text -> due time in server ms)
-- ARGV[1] the claim score cache_again_claim gave these keys
-- ARGV[2..] key texts
-- returns how many were removed (a replay removes none: harmless)
local removed = 0
for i = 2, #ARGV do
  local score = redis.call('zscore', KEYS[1], ARGV[i])
  if score and tonumber(score) == tonumber(ARGV[1]) then
    redis.call('zrem', KEYS[1], ARGV[i])
    removed = removed + 1
  end
end
return removed
