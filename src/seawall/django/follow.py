"""Django cache keys invalidated from the database's change log (`seawall follow`).

`seawall follow` (seawall.cdc) reads every committed row change of the mapped tables and
voids the seawall.Cache entry of each row, whoever wrote it: the application, a
migration, a batch job, an UPDATE in a SQL console. With `invalidator(cache)` as its
`on_invalidated`, each row of `--map TABLE=NAMESPACE` also drops the Django cache key
"NAMESPACE:KEY" (KEY: the row's primary key, or the mapped column, as text), in Redis, with
its load lease, and in every process's L1, as `cache.delete()` does. The management
command `seawall_follow` runs it:

    python manage.py seawall_follow postgresql://seawall@db/shop \\
        --map shop_product=product [--cache default]

for entries cached as `cache.get_or_set(f"product:{pk}", ...)` (see docs/django.md).
"""

from __future__ import annotations

from collections.abc import Callable

from seawall.django.cache import RedisCache


def django_key(namespace: str, key: str) -> str:
    """The Django cache key of a row of `--map TABLE=NAMESPACE`: "NAMESPACE:KEY"."""
    return f"{namespace}:{key}"


def invalidator(cache: RedisCache) -> Callable[[list[tuple[str, str]]], None]:
    """An `on_invalidated` for seawall.cdc.Follower: deletes each (namespace, key)'s
    Django key from `cache` everywhere. Never through the breaker: a Redis error reaches
    the follower, which retries the batch before moving its checkpoint."""
    if not isinstance(cache, RedisCache):
        raise TypeError(
            f"seawall follow can invalidate a seawall.django.RedisCache only, got {cache!r}"
        )

    def drop(entries: list[tuple[str, str]]) -> None:
        made = [cache.make_key(django_key(namespace, key)) for namespace, key in entries]
        if made:
            store = cache._store()
            cache._second_deletes(store).drop_everywhere(made)

    return drop
