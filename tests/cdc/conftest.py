"""Fixtures of the change-log follower tests: a fresh database per test, a follower."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cdc.databases import PostgresDatabase
from seawall.cdc import Follower
from seawall.launcher._postgres import PostgresProcess


@pytest.fixture
def database(seawall_postgres: PostgresProcess) -> Iterator[PostgresDatabase]:
    """A fresh database with a `users (id INT PRIMARY KEY, email TEXT, name TEXT)` table."""
    if not seawall_postgres.running:
        seawall_postgres.restart()
    db = PostgresDatabase.fresh(seawall_postgres)
    db.execute("CREATE TABLE users (id INT PRIMARY KEY, email TEXT UNIQUE, name TEXT)")
    yield db
    db.drop()


@pytest.fixture
def run_follower() -> Iterator[Callable[..., Follower]]:
    """``run_follower(source_url, client, maps, **kw)``: a Follower running in a thread,
    stopped after the test."""
    started: list[tuple[Follower, threading.Thread]] = []

    def start(source: str, client: Any, maps: list[str], **kwargs: Any) -> Follower:
        follower = Follower(source, client, maps, **kwargs)
        thread = threading.Thread(target=follower.run, daemon=True)
        thread.start()
        started.append((follower, thread))
        return follower

    yield start
    for follower, _thread in started:
        follower.stop()
    for _follower, thread in started:
        thread.join(10)
