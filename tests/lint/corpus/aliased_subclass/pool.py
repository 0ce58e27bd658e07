from typing import TYPE_CHECKING

from redis.asyncio import Redis

if TYPE_CHECKING:
    BaseRedis = Redis[bytes]
else:
    BaseRedis = Redis


class JobRedis(BaseRedis):
    async def all_results(self, prefix: str) -> list[bytes]:
        names = await self.keys(prefix + "*")
        return [await self.get(name) for name in names]
