"""A failed acquire is reported once: by what the caller gets (False, or LockTimeout),
not again by a WARNING when the background give-back of its token cannot reach the
frozen server either (issue 13, item 6)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

import seawall


def test_a_timed_out_acquire_on_a_frozen_server_logs_no_warning(
    seawall_server_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server = seawall_server_factory()
    # A socket timeout far above the bound below: an acquire that waited for it, not for
    # its own timeout, is told from a machine that stalled for a while.
    r = server.client(socket_timeout=60.0)
    lock = seawall.Lock(r, "frozen-cleanup", ttl=1.0)
    assert lock.acquire(timeout=0.5) and (lock.release() or True)  # connections warm
    with caplog.at_level(logging.DEBUG, logger="seawall"):
        server.pause()
        try:
            started = time.monotonic()
            assert lock.acquire(timeout=0.5) is False
            assert time.monotonic() - started < 30.0
            # The give-back retries until the ttl is over, then gives up and logs: wait
            # for that (a fixed wait can end before it on a loaded machine, and a
            # give-back that runs after the resume succeeds and logs nothing).
            deadline = time.monotonic() + 30
            while not cleanups(caplog):
                assert time.monotonic() < deadline, "the give-back's failure was not logged"
                time.sleep(0.05)
        finally:
            server.resume()
    found = cleanups(caplog)
    assert found, "the give-back's failure is still recorded (at DEBUG)"
    assert all(record.levelno == logging.DEBUG for record in found), found
    r.close()


def cleanups(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "cleanup of lock 'frozen-cleanup'" in r.getMessage()]
