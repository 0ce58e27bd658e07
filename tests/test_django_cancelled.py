"""seawall.django's asyncio waits stop when their task is cancelled, even where redis-py's
read swallowed the cancellation (the lease script's reply then comes after it): a cancelled
aget_or_set does not wait for another process's callable, nor run its own, and a cancelled
abegin_load (the cache middleware's lease on a page) does not wait for another's render."""

from __future__ import annotations

import asyncio
import uuid

import djangoworkers
import pytest
from swallowing import SwallowingClient, cancelled_in

djangoworkers.setup("redis://unused", "django.core.cache.backends.locmem.LocMemCache")

from seawall.django import RedisCache  # noqa: E402

BOUND = 2.0  # seconds from cancel() to the task's end; the other caller holds 5 s longer


@pytest.mark.parametrize("call", ["aget_or_set waits", "aget_or_set loads", "abegin_load"])
def test_a_cancel_swallowed_by_the_lease_script_still_stops_the_caller(
    seawall_url: str, call: str
) -> None:
    holder = RedisCache(seawall_url, {"OPTIONS": {"lease": 60.0}})
    reader = RedisCache(seawall_url, {"OPTIONS": {"lease": 60.0}})
    key = f"cancel-{uuid.uuid4().hex[:8]}"
    calls = 0

    def counted() -> str:
        nonlocal calls
        calls += 1
        return "made"

    async def main() -> tuple[float, bool]:
        loading = asyncio.Event()

        async def slow() -> str:
            loading.set()
            await asyncio.sleep(BOUND + 5)
            return "slow"

        store = reader._astore()
        client = store.client = SwallowingClient.from_url(seawall_url)
        held = None
        if call == "abegin_load":
            assert await holder.abegin_load(key) is not None  # another renders the page
        elif call == "aget_or_set waits":
            held = asyncio.create_task(holder.aget_or_set(key, slow))
            await asyncio.wait_for(loading.wait(), 10)
        if call == "abegin_load":
            took, cancelled = await cancelled_in(
                client, "EVALSHA", lambda: reader.abegin_load(key), BOUND + 10
            )
        else:
            took, cancelled = await cancelled_in(
                client, "EVALSHA", lambda: reader.aget_or_set(key, counted), BOUND + 10
            )
        if held is not None:
            held.cancel()
            await asyncio.gather(held, return_exceptions=True)
        if call == "aget_or_set loads":
            # The lease the swallowed script granted went back at once: another makes the
            # value now, not once the lease (60 s) has run out.
            async with asyncio.timeout(BOUND):
                assert await holder.aget_or_set(key, counted) == "made"
        await client.aclose()
        return took, cancelled

    took, cancelled = asyncio.run(main())
    assert took < BOUND, f"{call}: the cancelled caller went on for {took:.1f} s"
    assert cancelled, call
    assert calls == (1 if call == "aget_or_set loads" else 0)  # the holder's, not ours
