"""@cache.cached(): keys bound to the signature, handles to the entries, bad use refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from conftest import Target

import seawall
import seawall.aio
from seawall.cache._call_keys import KEY_LIMIT


class Tenant:
    """Short-lived objects with the default repr: their addresses are reused."""

    def __init__(self, cache: seawall.Cache, tenant_id: int) -> None:
        self.tenant_id = tenant_id
        self.cache = cache

    def row(self, row_id: int) -> str:
        return f"tenant {self.tenant_id} row {row_id}"


def test_methods_of_200_short_lived_objects_never_share_entries(standalone: Target) -> None:
    cache = seawall.Cache(standalone.sync(), "tenants", ttl=60)

    class Rows(Tenant):
        @cache.cached(key="{self.tenant_id}:{row_id}")
        def row(self, row_id: int) -> str:
            return super().row(row_id)

    wrong = 0
    for tenant_id in range(200):
        answer = Rows(cache, tenant_id).row(1)  # each object is garbage right after
        wrong += answer != f"tenant {tenant_id} row 1"
    assert wrong == 0  # before: 199 of 200 got another tenant's row (keyed by address)

    # Without a key, `self` is not part of it: the result is per argument, as documented.
    class Shared(Tenant):
        @cache.cached()
        def row(self, row_id: int) -> str:
            return super().row(row_id)

    assert "Shared" in Shared.row.key(Shared(cache, 1), 1)
    assert Shared.row.key(Shared(cache, 1), 1) == Shared(cache, 2).row.key(1)
    assert "0x" not in Shared(cache, 3).row.key(1)


def test_one_call_one_key_however_it_is_spelled(target: Target) -> None:
    cache = seawall.Cache(target.sync(), "spelled", ttl=60)
    calls: list[Any] = []

    @cache.cached()
    def profile(uid: int, full: bool = False) -> str:
        calls.append((uid, full))
        return f"{uid}:{full}"

    assert profile(3) == profile(uid=3) == profile(3, full=False) == profile(3, False) == "3:False"
    assert calls == [(3, False)]
    assert profile(3, full=True) == "3:True" and len(calls) == 2

    @cache.cached()
    def echo(value: Any) -> str:
        calls.append(value)
        return repr(value)

    calls.clear()
    for value in [(1, 2), [1, 2], 1, "1", 1.0, {"a": 1, "b": 2}, {"b": 2, "a": 1}, {1, 2}, None]:
        echo(value)
    # A tuple and a list, 1 and "1" and 1.0 differ; dict and set order do not matter.
    assert calls == [(1, 2), [1, 2], 1, "1", 1.0, {"a": 1, "b": 2}, {1, 2}, None]

    key = echo.key("x" * 10_000)
    assert len(key) < len(echo.key("x")) + 40 and len(key) < KEY_LIMIT  # hashed, not huge


def test_arguments_without_a_text_form_are_refused(standalone: Target) -> None:
    cache = seawall.Cache(standalone.sync(), "refused", ttl=60)

    @cache.cached()
    def load(thing: Any) -> int:
        return 1

    with pytest.raises(TypeError, match=r"memory address.*key="):
        load(object())
    with pytest.raises(ValueError, match="not parameters"):
        cache.cached(key="user:{user}")(lambda user_id: user_id)
    with pytest.raises(TypeError, match="async function"):

        @cache.cached()
        async def coroutine_function() -> int:
            return 1

    with pytest.raises(TypeError, match="missing a required argument"):
        load()


def test_handles_invalidate_refresh_set_get_and_condition(target: Target, world: str) -> None:
    loads: list[int] = []

    def sync_body() -> None:
        cache = seawall.Cache(target.sync(), "handles", ttl=60)

        @cache.cached(key="user:{user_id}", condition=lambda row: row is not None)
        def user(user_id: int) -> dict[str, int] | None:
            loads.append(user_id)
            return None if user_id < 0 else {"id": user_id, "v": len(loads)}

        assert user(1) == {"id": 1, "v": 1} and user(1) == {"id": 1, "v": 1}
        assert user.get(1) == {"id": 1, "v": 1} and user.key(1) == "user:1"
        user.invalidate(1)
        assert user.get(1) is None
        assert user(1) == {"id": 1, "v": 2}
        assert user.refresh(1) == {"id": 1, "v": 3} and user(1) == {"id": 1, "v": 3}
        user.set({"id": 1, "v": 99}, 1)
        assert user(1) == {"id": 1, "v": 99}
        assert user(-1) is None and user(-1) is None and loads.count(-1) == 2  # not cached
        assert user.__wrapped__(5) == {"id": 5, "v": len(loads)}

    async def async_body() -> None:
        r = target.aio()
        cache = seawall.aio.Cache(r, "handles-aio", ttl=60)

        @cache.cached(key="user:{user_id}", condition=lambda row: row is not None)
        async def user(user_id: int) -> dict[str, int] | None:
            loads.append(user_id)
            return None if user_id < 0 else {"id": user_id, "v": len(loads)}

        assert await user(1) == {"id": 1, "v": 1} and await user(1) == {"id": 1, "v": 1}
        assert await user.get(1) == {"id": 1, "v": 1}
        await user.invalidate(1)
        assert await user.get(1) is None
        assert await user(1) == {"id": 1, "v": 2}
        assert await user.refresh(1) == {"id": 1, "v": 3}
        await user.set({"id": 1, "v": 99}, 1)
        assert await user(1) == {"id": 1, "v": 99}
        assert await user(-1) is None and await user(-1) is None and loads.count(-1) == 2
        with pytest.raises(TypeError, match="not an async function"):

            @cache.cached()
            def plain(x: int) -> int:
                return x

        await r.aclose()

    if world == "sync":
        sync_body()
    else:
        asyncio.run(async_body())


def test_the_decorated_function_shows_its_signature_to_getfullargspec(standalone: Target) -> None:
    # dogpile.cache's test_cache_preserve_sig found it: inspect.signature followed
    # __wrapped__, but getfullargspec (Celery's task argument check, the decorator
    # package) does not, and saw the wrapper's (self, *args, **kwargs).
    import inspect

    cache = seawall.Cache(standalone.sync(), "signatures", ttl=60)

    def func(a: int, b: int, c: bool = True, *args: Any, **kwargs: Any) -> None:
        return None

    async def afunc(a: int, b: int, c: bool = True, *args: Any, **kwargs: Any) -> None:
        return None

    async def async_argspec() -> inspect.FullArgSpec:
        client = standalone.aio()
        try:
            return inspect.getfullargspec(seawall.aio.Cache(client, "signatures").cached()(afunc))
        finally:
            await client.aclose()

    expected = inspect.getfullargspec(func)
    assert inspect.getfullargspec(cache.cached()(func)) == expected
    assert asyncio.run(async_argspec()) == expected

    class Rows:
        @cache.cached()
        def row(self, row_id: int) -> str:
            return str(row_id)

    # Bound to an instance, it takes what the method takes after self, as a method does.
    assert list(inspect.signature(Rows().row).parameters) == ["row_id"]
    assert list(inspect.signature(Rows.row).parameters) == ["self", "row_id"]
