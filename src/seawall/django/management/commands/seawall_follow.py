"""`manage.py seawall_follow SOURCE_URL --map TABLE=NAMESPACE[:COLUMN] [--cache ALIAS]`:
`seawall follow`, also deleting the Django cache key "NAMESPACE:KEY" of every changed row
(seawall.django.follow). Run two, on two machines, for fail-over: one leads at a time."""

from __future__ import annotations

from typing import Any

from django.core.cache import caches
from django.core.management.base import BaseCommand, CommandError

from seawall.django.cache import RedisCache
from seawall.django.follow import invalidator


class Command(BaseCommand):
    help = (
        "Follow the database's change log and invalidate the Django cache key "
        "NAMESPACE:KEY of every changed row of each --map TABLE=NAMESPACE[:COLUMN]"
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("source", help="postgresql://... or mysql://... (docs/cdc.md)")
        parser.add_argument(
            "--map", dest="maps", action="append", required=True, metavar="TABLE=NAMESPACE"
        )
        parser.add_argument("--cache", default="default", help="the cache alias (default)")
        parser.add_argument("--ttl", type=float, default=10.0, help="the election lock's ttl")

    def handle(self, *args: Any, **options: Any) -> None:
        import seawall.cdc

        cache = caches[options["cache"]]
        if not isinstance(cache, RedisCache):
            raise CommandError(
                f"CACHES[{options['cache']!r}] must be a seawall.django.RedisCache, got "
                f"{type(cache).__module__}.{type(cache).__qualname__}"
            )
        seawall.cdc.follow(
            options["source"],
            cache.client(),
            options["maps"],
            ttl=options["ttl"],
            on_invalidated=invalidator(cache),
        )
