from redis.asyncio import Redis


class RedisBackend:
    """A cache backend: its general delete() also deletes locks, among other keys; its
    lock is released by a script elsewhere, not by delete()."""

    def __init__(self, url: str) -> None:
        self._client = Redis.from_url(url, socket_timeout=5.0)

    async def set_lock(self, key: str, value: str, expire_ms: int) -> bool:
        return bool(await self._client.set(key, value, px=expire_ms, nx=True))

    async def delete(self, key: str) -> bool:
        return bool(await self._client.unlink(key))

    async def incr_bits(self, key: str, *indexes: int) -> list[int]:
        ops = self._client.bitfield(key)  # a builder: nothing is sent until execute()
        for index in indexes:
            ops.incrby(fmt="u8", offset=f"#{index}", increment=1, overflow="SAT")
        return list(await ops.execute())
