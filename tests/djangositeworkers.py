"""Processes of the recipe tests: each runs tests/djangosite (its settings, its models and
their post_save handler) against the test's Redis, on SQLite files of the test's folder:
a primary ("default") and a replica that the scenario updates late, as a lagging replica
would be."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any


def configure(url: str, folder: str) -> None:
    os.environ.update(
        DJANGO_SETTINGS_MODULE="djangosite.settings",
        DJANGOSITE_REDIS_URL=url,
        DJANGOSITE_DB=str(Path(folder) / "primary.sqlite3"),
        DJANGOSITE_REPLICA_DB=str(Path(folder) / "replica.sqlite3"),
    )
    import django
    from django.db import connections

    django.setup()
    from djangosite.models import Product

    for alias in ("default", "replica"):
        tables = connections[alias].introspection.table_names()
        if Product._meta.db_table not in tables:
            with connections[alias].schema_editor() as editor:
                editor.create_model(Product)


def _until_gone(key: str, bound: float) -> bool:
    """Whether `key` left the cache within `bound` seconds."""
    from django.core.cache import cache

    deadline = time.monotonic() + bound
    while cache.get(key) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def replica_lag(url: str, folder: str, again_after: float | None, bound: float) -> dict[str, Any]:
    """A product renamed on the primary while a reader fills the cache from the lagging
    replica right after the first delete; the replica then catches up. With the recipe's
    `again_after` (None: a single delete), what the cache holds: the stale fill, whether
    it went within `bound` seconds, and what a read gives then."""
    configure(url, folder)
    from djangosite import models
    from djangosite.models import Product, cached_product, product_key

    models.AGAIN_AFTER = again_after
    for alias in ("default", "replica"):  # no signal: nothing to invalidate yet
        Product.objects.using(alias).bulk_create([Product(pk=1, name="old", price=10)])
    assert cached_product(1, using="replica") == {"name": "old", "price": 10}

    product = Product.objects.get(pk=1)
    product.name = "new"
    product.save()  # post_save: deleted after the commit (and again later, if asked)
    stale = cached_product(1, using="replica")  # a miss, read where the write is not yet
    Product.objects.using("replica").filter(pk=1).update(name="new")  # no signal either
    gone = _until_gone(product_key(1), bound)
    return {"stale": stale, "gone": gone, "after": cached_product(1, using="replica")}


def save_and_die(url: str, folder: str) -> None:
    """Rename the product (the recipe schedules its second delete), then die at once,
    before this process could carry the second delete out itself."""
    configure(url, folder)
    from djangosite.models import Product

    Product.objects.bulk_create([Product(pk=1, name="old", price=10)])
    product = Product.objects.get(pk=1)
    product.name = "new"
    product.save()
    os._exit(0)
