-- ARGV[1] prefix
local keys = redis.call('KEYS', ARGV[1] .. '*')
for _, key in ipairs(keys) do
    redis.call('DEL', key)
end
return #keys
