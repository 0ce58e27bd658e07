"""pytest plugin that runs Flask-Session's own Redis tests with seawall's session interface.

Loaded by test_sessions_flask_suite.py (`-p flasksessionsuite_plugin`) into a pytest run of
test_session.py from Flask-Session 0.5.0's sdist (the last one that ships tests), with the
flask_session package of that same sdist ($SEAWALL_FLASK_SESSION_SRC) first on sys.path.
Flask-Session's tests are not changed: `Session(app)` reads the app's config as it always
does, and where it would build its own RedisSessionInterface (`SESSION_TYPE = "redis"`) it
gets seawall's (seawall.sessions.flask.RedisSessionInterface) on the Redis at
$SEAWALL_FLASK_SESSION_SUITE_REDIS, emptied before each test. Each test's outcome is
written as JSON to $SEAWALL_PEER_SUITE_OUT. docs/sessions.md describes the mapping.
"""

from __future__ import annotations

import os
import sys
from typing import Any

sys.path.insert(0, os.environ["SEAWALL_FLASK_SESSION_SRC"])

import _pytest.monkeypatch
import flask_session
import pytest
import redis
from peersuites import outcome_recorder

from seawall.sessions.flask import RedisSessionInterface

_client = redis.Redis.from_url(os.environ["SEAWALL_FLASK_SESSION_SUITE_REDIS"])

pytest_runtest_logreport, pytest_sessionfinish = outcome_recorder()


def pytest_configure(config: pytest.Config) -> None:
    # As in flasksuite_plugin: an old name some Flask test helpers still use.
    if not hasattr(_pytest.monkeypatch, "notset"):
        _pytest.monkeypatch.notset = _pytest.monkeypatch.NOTSET  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _empty_redis() -> None:
    _client.flushdb()


def _seawall_interface(
    redis: Any, key_prefix: str, use_signer: bool = False, permanent: bool = True
) -> RedisSessionInterface:
    """Flask-Session's RedisSessionInterface(SESSION_REDIS, SESSION_KEY_PREFIX,
    SESSION_USE_SIGNER, SESSION_PERMANENT), answered with seawall's. SESSION_REDIS unset
    is Flask-Session's `Redis()` on localhost:6379: here, the private server. seawall
    names its own keys (no key prefix) and signs nothing (its session ids are 256-bit
    random tokens); a session that is not permanent is a browser-session cookie."""
    return RedisSessionInterface(redis or _client, browser_session=not permanent)


flask_session.RedisSessionInterface = _seawall_interface  # type: ignore[assignment]
