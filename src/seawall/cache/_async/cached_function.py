"""`@cache.cached()`: a function whose results are cached, and a handle to its entries.

The decorated function keeps its signature and gains, as dogpile's decorators do:
`invalidate(*args, **kw)` (drop the entry of that call everywhere), `refresh(*args, **kw)`
(run the function now and store the result), `set(value, *args, **kw)`, `get(*args,
**kw)` (the cached result or None, never runs the function), `key(*args, **kw)` (the
cache key of that call) and `__wrapped__`; `inspect.signature` and `getfullargspec` show
the function's parameters. On a method it binds like a function: each instance's call is
keyed by its arguments (see seawall.cache._call_keys).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar

from seawall.cache._call_keys import CallKeys
from seawall.shared._concurrency import async_call_loader, async_check_cached_function

P = ParamSpec("P")
R = TypeVar("R")


class _Uncached(Exception):
    """Carries a result that `condition` said not to cache out of the load."""

    def __init__(self, value: Any) -> None:
        super().__init__("result not cached")
        self.value = value


class AsyncCachedFunction(Generic[P, R]):
    def __init__(
        self,
        cache: Any,
        function: Callable[P, Any],
        ttl: float | None,
        key: str | Callable[..., Any] | None,
        condition: Callable[[Any], bool] | None,
        bound_to: Any = None,
        *,
        tags: tuple[str, ...] = (),
    ) -> None:
        async_check_cached_function(function, f"cache {cache.namespace!r}")
        self.cache = cache
        self.__wrapped__ = function
        self._ttl = ttl
        self._condition = condition
        self._keys = CallKeys(function, key)
        self._tags = [CallKeys(function, tag) for tag in tags]
        self._bound_to = bound_to
        functools.update_wrapper(self, function)
        # inspect.signature() would follow __wrapped__, but getfullargspec() (Celery's
        # argument check, the decorator package) reads only this.
        self.__signature__ = inspect.signature(function)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        bound = AsyncCachedFunction.__new__(AsyncCachedFunction)
        bound.__dict__.update(self.__dict__)
        bound._bound_to = instance
        # What a bound method shows: the parameters after self.
        parameters = list(self.__signature__.parameters.values())[1:]
        bound.__signature__ = self.__signature__.replace(parameters=parameters)
        return bound

    def _args(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return args if self._bound_to is None else (self._bound_to, *args)

    def key(self, *args: Any, **kwargs: Any) -> str:
        """The cache key of this call (as `get_or_load` would use it)."""
        return self._keys(self._args(args), kwargs)

    async def _run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        value = await async_call_loader(functools.partial(self.__wrapped__, *args, **kwargs))
        if self._condition is not None and not self._condition(value):
            raise _Uncached(value)
        return value

    async def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        full = self._args(args)
        try:
            return await self.cache.get_or_load(  # type: ignore[no-any-return]
                self._keys(full, kwargs),
                functools.partial(self._run, full, kwargs),
                self._ttl,
                tags=self._tags_of(full, kwargs),
            )
        except _Uncached as skipped:
            return skipped.value  # type: ignore[no-any-return]

    def _tags_of(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str] | None:
        return [tag(args, kwargs) for tag in self._tags] if self._tags else None

    async def get(self, *args: Any, **kwargs: Any) -> R | None:
        """The cached result of this call, or None; never runs the function."""
        return await self.cache.get(self.key(*args, **kwargs))  # type: ignore[no-any-return]

    async def set(self, value: Any, *args: Any, **kwargs: Any) -> None:
        """Store `value` as the result of this call (every process's L1 drops its copy)."""
        full = self._args(args)
        await self.cache.set(
            self._keys(full, kwargs), value, self._ttl, tags=self._tags_of(full, kwargs)
        )

    async def invalidate(self, *args: Any, **kwargs: Any) -> None:
        """Drop the cached result of this call, in Redis and in every process's L1."""
        await self.cache.delete(self.key(*args, **kwargs))

    async def refresh(self, *args: Any, **kwargs: Any) -> R:
        """Run the function now and store its result (unless `condition` refuses it)."""
        full = self._args(args)
        try:
            value = await self._run(full, kwargs)
        except _Uncached as skipped:
            return skipped.value  # type: ignore[no-any-return]
        await self.cache.set(
            self._keys(full, kwargs), value, self._ttl, tags=self._tags_of(full, kwargs)
        )
        return value  # type: ignore[no-any-return]
