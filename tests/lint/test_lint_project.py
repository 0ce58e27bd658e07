"""The first pass over a project: clients built in one module and used in another."""

from __future__ import annotations

from pathlib import Path

import pytest

from seawall.lint import lint_paths
from seawall.lint._index import module_name

STORE = """\
import redis

client = redis.Redis(socket_timeout=1.0)


def get_client() -> redis.Redis:
    return client


def connect():
    return redis.Redis(socket_timeout=1.0)


class Base:
    def __init__(self) -> None:
        self.backend = redis.Redis(socket_timeout=1.0)


class Connection(redis.Redis):
    pass


class Pools:
    def primary(self) -> "redis.Redis":
        return client
"""

JOBS = """\
from app import client
from app.store import Base, Connection, get_client
from . import store
from .store import connect


def purge() -> None:
    client.keys("job:*")  # line 8


def reset() -> None:
    get_client().flushdb()  # line 12


class Jobs(Base):
    def clear(self) -> None:
        self.backend.flushall()  # line 17


class Mine(Connection):
    def names(self) -> list[bytes]:
        return self.keys()  # line 22


def everything() -> None:
    store.client.keys()  # line 26
    db = connect()
    db.flushall()  # line 28


def primary(pools) -> None:
    pools.primary().keys()  # line 32


class Registry:
    def __init__(self) -> None:
        self.backend = {}

    def names(self) -> list[str]:
        return list(self.backend.keys())  # a dict: Registry is not Base
"""


DATABASE = """\
import redis

from app import Cache


class Database(redis.Redis):
    def cache(self, prefix: str) -> Cache:
        return Cache(self, prefix=prefix)
"""

CACHE = """\
class Cache:
    def __init__(self, database, prefix: str = "") -> None:
        self.database = database
        self.prefix = prefix

    def clear(self) -> None:
        for key in self.database.keys(self.prefix + "*"):  # line 7
            print(key)


class Unrelated:
    def __init__(self, database) -> None:
        self.database = database

    def names(self) -> list[str]:
        return list(self.database.keys())  # nobody passes this one a client
"""


def _project(tmp_path: Path) -> Path:
    package = tmp_path / "src" / "app"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from .store import client\nfrom .cache import Cache\n")
    (package / "store.py").write_text(STORE)
    (package / "jobs.py").write_text(JOBS)
    (package / "db.py").write_text(DATABASE)
    (package / "cache.py").write_text(CACHE)
    return package


def test_clients_from_other_modules_are_followed(tmp_path: Path) -> None:
    package = _project(tmp_path)
    report = lint_paths([str(tmp_path)])
    assert report.errors == []
    jobs = str(package / "jobs.py")
    found = sorted((f.line, f.rule) for f in report.findings if f.path == jobs)
    assert found == [
        (8, "SW001"),
        (12, "SW002"),
        (17, "SW002"),
        (22, "SW001"),
        (26, "SW001"),
        (28, "SW002"),
        (32, "SW001"),
    ]


def test_a_client_passed_to_a_class_of_another_module(tmp_path: Path) -> None:
    # Database(redis.Redis) hands itself to Cache, defined elsewhere and re-exported.
    package = _project(tmp_path)
    report = lint_paths([str(tmp_path)])
    found = [(f.line, f.rule) for f in report.findings if f.path == str(package / "cache.py")]
    assert found == [(7, "SW001")]


def test_one_file_alone_sees_none_of_them(tmp_path: Path) -> None:
    # The same file checked without its project: the neutral names say nothing.
    package = _project(tmp_path)
    report = lint_paths([str(package / "jobs.py")])
    assert report.findings == []


def test_module_names_follow_the_packages(tmp_path: Path) -> None:
    package = _project(tmp_path)
    assert module_name(str(package / "jobs.py")) == ("app.jobs", "app")
    assert module_name(str(package / "__init__.py")) == ("app", "app")
    assert module_name(str(tmp_path / "script.py")) == ("script", "")


def test_past_the_kept_trees_budget_files_are_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A project too big to keep every tree: the second pass parses the files again and
    # finds the same things.
    from seawall.lint import _runner

    _project(tmp_path)
    kept = sorted((f.path, f.line, f.rule) for f in lint_paths([str(tmp_path)]).findings)
    monkeypatch.setattr(_runner, "KEPT_SOURCE_BYTES", 0)
    parsed_again = sorted((f.path, f.line, f.rule) for f in lint_paths([str(tmp_path)]).findings)
    assert parsed_again == kept
    assert len(kept) >= 8  # jobs.py and cache.py, seen through the index
