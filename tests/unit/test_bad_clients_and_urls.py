"""Clients and database URLs that cannot work are refused at construction, saying what to pass.

None of these needs a server: constructing a client, a pipeline or a SQLAlchemy URL does
no I/O, and the refusals happen before any.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio

import seawall
import seawall.aio
from seawall.stock._sql import driver_url, open_table

SYNC = redis.Redis(port=1)
ASYNC = redis.asyncio.Redis(port=1)

# Every public constructor that takes one client, as (sync, asyncio) factories.
MAKERS: list[tuple[str, Callable[[Any], Any], Callable[[Any], Any]]] = [
    ("Lock", lambda c: seawall.Lock(c, "x"), lambda c: seawall.aio.Lock(c, "x")),
    ("RLock", lambda c: seawall.RLock(c, "x"), lambda c: seawall.aio.RLock(c, "x")),
    ("Semaphore", lambda c: seawall.Semaphore(c, "x"), lambda c: seawall.aio.Semaphore(c, "x")),
    ("RWLock", lambda c: seawall.RWLock(c, "x"), lambda c: seawall.aio.RWLock(c, "x")),
    ("Redlock", lambda c: seawall.Redlock([c], "x"), lambda c: seawall.aio.Redlock([c], "x")),
    ("Stock", lambda c: seawall.Stock(c, "x"), lambda c: seawall.aio.Stock(c, "x")),
    ("Cache", lambda c: seawall.Cache(c, "x"), lambda c: seawall.aio.Cache(c, "x")),
    (
        "Idempotent",
        lambda c: seawall.Idempotent(c, "x"),
        lambda c: seawall.aio.Idempotent(c, "x"),
    ),
    (
        "BloomFilter",
        lambda c: seawall.BloomFilter(c, "x", 100),
        lambda c: seawall.aio.BloomFilter(c, "x", 100),
    ),
]


@pytest.mark.parametrize(("what", "make_sync", "make_async"), MAKERS, ids=[m[0] for m in MAKERS])
def test_a_pipeline_is_not_a_client(
    what: str, make_sync: Callable[[Any], Any], make_async: Callable[[Any], Any]
) -> None:
    # A Pipeline subclasses Redis, so it used to pass the client check and fail later
    # (scripts buffered until execute(), replies that are the pipeline itself).
    with pytest.raises(TypeError, match=r"Pipeline.*pass the client itself"):
        make_sync(SYNC.pipeline())
    with pytest.raises(TypeError, match=r"Pipeline.*pass the client itself"):
        make_async(ASYNC.pipeline())
    with pytest.raises(TypeError, match=r"Pipeline"):
        make_sync(SYNC.pipeline(transaction=False))


@pytest.mark.parametrize("serializer", ["pickle", "msgpack"])
def test_binary_serializer_with_decode_responses_is_refused(serializer: str) -> None:
    words = rf"decode_responses=True.*{serializer}.*decode_responses=False"
    with pytest.raises(ValueError, match=words):
        seawall.Cache(redis.Redis(port=1, decode_responses=True), "x", serializer=serializer)
    with pytest.raises(ValueError, match=words):
        seawall.aio.Cache(
            redis.asyncio.Redis(port=1, decode_responses=True), "x", serializer=serializer
        )


def test_json_with_decode_responses_and_pickle_without_are_fine() -> None:
    seawall.Cache(redis.Redis(port=1, decode_responses=True), "x", serializer="json")
    seawall.Cache(redis.Redis(port=1), "x", serializer="pickle")
    seawall.aio.Cache(redis.asyncio.Redis(port=1), "x", serializer="msgpack")


# -- OrderSink databases -----------------------------------------------------------------


def _importable(*present: str) -> Callable[[str], bool]:
    return lambda module: module in present


@pytest.mark.parametrize(
    ("url", "present", "expected"),
    [
        ("mysql://u:p@db:3306/shop", ("pymysql",), "mysql+pymysql://u:p@db:3306/shop"),
        ("mysql://u@db/shop", ("MySQLdb",), "mysql+mysqldb://u@db/shop"),
        ("mariadb://u@db/shop", ("pymysql", "MySQLdb"), "mariadb+pymysql://u@db/shop"),
        ("postgresql://u@db/shop", ("psycopg", "psycopg2"), "postgresql+psycopg://u@db/shop"),
        ("postgresql://u@db/shop", ("psycopg2",), "postgresql+psycopg2://u@db/shop"),
        ("postgres://u@db/shop", ("psycopg",), "postgresql+psycopg://u@db/shop"),
        # A URL that names its driver is the user's choice and is kept.
        ("mysql+mysqldb://u@db/shop", ("pymysql",), "mysql+mysqldb://u@db/shop"),
        ("postgresql+asyncpg://u@db/shop", (), "postgresql+asyncpg://u@db/shop"),
        ("sqlite:///orders.db", (), "sqlite:///orders.db"),
    ],
)
def test_bare_urls_get_the_installed_driver(
    url: str, present: tuple[str, ...], expected: str
) -> None:
    assert driver_url(url, _importable(*present)) == expected


@pytest.mark.parametrize(
    ("url", "install"),
    [
        ("mysql://u@db/shop", "pip install 'seawall[mysql]'"),
        ("mariadb://u@db/shop", "pip install 'seawall[mysql]'"),
        ("postgresql://u@db/shop", "pip install 'seawall[postgresql]'"),
        ("postgres://u@db/shop", "pip install 'seawall[postgresql]'"),
    ],
)
def test_no_driver_installed_names_the_install_command(url: str, install: str) -> None:
    with pytest.raises(ImportError, match=rf"no driver.*{install.replace('[', '.')}"):
        driver_url(url, _importable())


def test_bare_mysql_url_uses_the_installed_pymysql() -> None:
    # Before: SQLAlchemy's default MySQL driver (mysqlclient) was asked for and the sink
    # failed with "driver ... is missing" although PyMySQL was installed. Now PyMySQL is
    # loaded and tries to connect: nothing listens on port 1, so the error is the
    # connection's, raised by PyMySQL.
    assert importlib.util.find_spec("pymysql") is not None, "install seawall[dev]"
    import sqlalchemy.exc

    with pytest.raises(sqlalchemy.exc.OperationalError, match="pymysql"):
        open_table("mysql://nobody@127.0.0.1:1/shop")


@pytest.mark.parametrize(
    "database",
    [
        "localhost/orders",
        "user:secret@db.example/shop",
        "orders",
        "db.example:5432/shop",
        "orders.txt",
    ],
)
def test_a_path_without_a_sqlite_suffix_is_refused(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"\.db, \.sqlite or \.sqlite3.*sqlite:///") as caught:
        open_table(database)
    assert "secret" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []  # no SQLite file was created
    with pytest.raises(ValueError, match=r"\.db, \.sqlite or \.sqlite3"):
        open_table(Path(database))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("name", ["orders.db", "orders.sqlite", "orders.SQLITE3"])
def test_sqlite_paths_and_urls_are_accepted(name: str, tmp_path: Path) -> None:
    open_table(str(tmp_path / name)).close()
    open_table(tmp_path / f"path-{name}").close()
    open_table(f"sqlite:///{tmp_path / f'url-{name}'}").close()
    assert len(list(tmp_path.iterdir())) >= 3
