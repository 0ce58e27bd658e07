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
    r = server.client(socket_timeout=5.0)
    lock = seawall.Lock(r, "frozen-cleanup", ttl=1.0)
    assert lock.acquire(timeout=0.5) and (lock.release() or True)  # connections warm
    with caplog.at_level(logging.DEBUG, logger="seawall"):
        server.pause()
        try:
            started = time.monotonic()
            assert lock.acquire(timeout=0.5) is False
            assert time.monotonic() - started < 3.0
            time.sleep(2.0)  # the give-back retries until the ttl is over, then gives up
        finally:
            server.resume()
    cleanups = [r for r in caplog.records if "cleanup of lock 'frozen-cleanup'" in r.getMessage()]
    assert cleanups, "the give-back's failure is still recorded (at DEBUG)"
    assert all(record.levelno == logging.DEBUG for record in cleanups), cleanups
    r.close()
