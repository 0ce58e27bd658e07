import redis

RESET_ALL = """
local locks = redis.call('keys', 'lock:*')
for _, lock in ipairs(locks) do
    redis.call('del', lock)
end
return #locks
"""


def reset_all(client: redis.Redis) -> int:
    return client.register_script(RESET_ALL)()


# The same kind of script kept as bytes, as some libraries keep theirs.
FLUSH_ALL = b"""
redis.call("flushdb")
return 1
"""


def flush(client: redis.Redis) -> int:
    return client.register_script(FLUSH_ALL)()
