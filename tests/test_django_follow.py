"""`seawall follow` invalidating Django cache keys (docs/django.md, "Rows changed
elsewhere"): a row of a model's table changed behind Django's back (a raw UPDATE, no
signal) drops its Django cache entry "product:<pk>", in Redis and in the L1, through
seawall.django.follow.invalidator as the follower's on_invalidated; against a real
PostgreSQL (logical decoding) and a real Redis."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import djangoworkers
import pytest
from cdc.databases import PostgresDatabase
from cdc.helpers import wait_until

djangoworkers.setup("redis://unused", "django.core.cache.backends.locmem.LocMemCache")

from django.core.management import CommandError, call_command  # noqa: E402

from seawall.cdc import Follower  # noqa: E402
from seawall.django import RedisCache  # noqa: E402
from seawall.django.follow import invalidator  # noqa: E402

TABLE = "CREATE TABLE djangosite_product (id INT PRIMARY KEY, name VARCHAR(100), price INT)"


@pytest.fixture
def database(seawall_postgres: Any) -> Iterator[PostgresDatabase]:
    if not seawall_postgres.running:
        seawall_postgres.restart()
    db = PostgresDatabase.fresh(seawall_postgres)
    db.execute(TABLE)
    db.execute("INSERT INTO djangosite_product VALUES (1, 'old', 10), (2, 'other', 20)")
    yield db
    db.drop()


def test_a_row_changed_elsewhere_leaves_the_django_cache(
    database: PostgresDatabase, seawall_url: str
) -> None:
    cache = RedisCache(seawall_url, {"OPTIONS": {"l1_size": 100, "l1_ttl": 60.0}})
    follower = Follower(
        database.url,
        cache.client(),
        ["djangosite_product=product"],
        on_invalidated=invalidator(cache),
    )
    thread = threading.Thread(target=follower.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: follower.status().streaming, 15, "the follower streams")
        cache.set("product:1", {"name": "old"})
        cache.set("product:2", {"name": "other"})
        assert cache.get("product:1") == {"name": "old"}  # held in the L1 too
        database.execute("UPDATE djangosite_product SET name = 'new' WHERE id = 1")
        wait_until(lambda: cache.get("product:1") is None, 10, "the update invalidates")
        assert not cache.client().exists(cache.make_key("product:1"))
        assert cache.get("product:2") == {"name": "other"}, "an unchanged row was dropped"
        database.execute("DELETE FROM djangosite_product WHERE id = 2")
        wait_until(lambda: cache.get("product:2") is None, 10, "the delete invalidates")
    finally:
        follower.stop()
        thread.join(10)


def test_the_command_needs_a_seawall_cache() -> None:
    with pytest.raises(CommandError, match=r"must be a seawall\.django\.RedisCache"):
        call_command("seawall_follow", "postgresql://nobody@127.0.0.1:1/x", "--map", "t=t")
    with pytest.raises(TypeError, match=r"seawall\.django\.RedisCache only"):
        invalidator(object())  # type: ignore[arg-type]
