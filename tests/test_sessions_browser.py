"""End to end in a real browser: headless Chromium logs in on one process of the app and
is recognised by another. Needs Debian's `chromium` and `chromium-driver`."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sessionapps
from browsers import page_json

HERE = Path(__file__).resolve().parent


def _app_process(port: int, url: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), *sys.path]))
    command = [sys.executable, str(HERE / "sessionapps.py"), str(port), url]
    return subprocess.Popen(command, env=env)


def _wait_listening(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            assert process.poll() is None, f"the app on port {port} exited"
            assert time.monotonic() < deadline, f"the app on port {port} did not start in 20 s"
            time.sleep(0.05)


@pytest.fixture
def two_processes(standalone: Any) -> Iterator[list[str]]:
    processes, bases = [], []
    try:
        ports = []
        for _ in range(2):
            with sessionapps.free_socket() as sock:
                ports.append(sock.getsockname()[1])
        # Both start at once: their imports overlap.
        processes = [_app_process(port, standalone.url) for port in ports]
        for process, port in zip(processes, ports, strict=True):
            _wait_listening(process, port)
            bases.append(f"http://127.0.0.1:{port}")
        yield bases
    finally:
        for process in processes:
            process.terminate()
            process.wait(10)


def test_a_browser_logged_in_on_one_process_is_recognised_by_another(
    two_processes: list[str], chromium: Any
) -> None:
    first, second = two_processes
    assert page_json(chromium, f"{first}/") == {"data": {}, "user": None}
    page_json(chromium, f"{first}/put?cart=3")
    anonymous = chromium.get_cookie("session")["value"]
    page_json(chromium, f"{first}/login?user=alice")
    cookie = chromium.get_cookie("session")
    assert cookie["value"] != anonymous and cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    # HttpOnly: the page's scripts cannot read the id.
    assert "session" not in chromium.execute_script("return document.cookie")
    # Cookies are per host, not per port: the second process gets the same cookie.
    assert page_json(chromium, f"{second}/") == {
        "data": {"cart": "3", "user": "alice"},
        "user": "alice",
    }
    page_json(chromium, f"{second}/logout")
    assert chromium.get_cookie("session") is None
    assert page_json(chromium, f"{first}/") == {"data": {}, "user": None}
