"""pytest plugin that runs Flask's own tests with seawall's session interface.

Loaded by flasksuite.py (`-p flasksuite_plugin`) into a pytest run of Flask's
tests/test_basic.py: every Flask app gets RedisSessionInterface on the Redis at
$SEAWALL_FLASK_SUITE_REDIS (emptied before each test), and each test's outcome is written
as JSON to $SEAWALL_FLASK_SUITE_OUT. Flask's tests are not changed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import _pytest.monkeypatch
import flask
import pytest
import redis

from seawall.sessions.flask import RedisSessionInterface

_client = redis.Redis.from_url(os.environ["SEAWALL_FLASK_SUITE_REDIS"])
_outcomes: dict[str, str] = {}


def pytest_configure(config: pytest.Config) -> None:
    # Flask's conftest.py uses a name pytest 9 renamed (notset -> NOTSET).
    if not hasattr(_pytest.monkeypatch, "notset"):
        _pytest.monkeypatch.notset = _pytest.monkeypatch.NOTSET  # type: ignore[attr-defined]
    # The class attribute every app reads: Flask's tests build their apps themselves.
    flask.Flask.session_interface = RedisSessionInterface(_client)


@pytest.fixture(autouse=True)
def _empty_redis() -> None:
    _client.flushdb()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # A test's outcome: its call's, unless its setup or teardown failed.
    name = report.nodeid.split("::", 1)[1]
    counts = report.when == "call" or report.outcome != "passed"
    if counts and _outcomes.get(name) in (None, "passed"):
        _outcomes[name] = report.outcome


def pytest_sessionfinish(session: Any) -> None:
    Path(os.environ["SEAWALL_FLASK_SUITE_OUT"]).write_text(json.dumps(_outcomes, indent=1))
