"""A Django project (tests/djangosite) under gunicorn with two sync worker processes,
seawall.django as its cache and session engine, driven by a real headless Chromium: a
session written on one worker is read on both, two requests of one user that overlap on
the two workers keep both their writes, login (cycle_key) kills the old id in Redis,
logout kills the session. Needs gunicorn (the dev extra) and Chromium (see browsers.py)."""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sessionapps
from browsers import fetch_all, page_json

HERE = Path(__file__).resolve().parent
WORKERS = 2
# How long a request of a parallel pair holds its worker: the other one of the pair can
# then only be served by the other worker.
HOLD_MS = 400
COOKIE = "sessionid"


@dataclass
class Site:
    base: str
    process: subprocess.Popen[bytes]
    log: Path

    def get(self, path: str, cookie: str | None = None) -> Any:
        """GET `path` outside the browser (an old cookie replayed, say); its JSON."""
        request = urllib.request.Request(self.base + path)
        if cookie is not None:
            request.add_header("Cookie", f"{COOKIE}={cookie}")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)


def _wait_for_both_workers(site: Site) -> None:
    """Until two requests held together are answered by two processes: both workers
    are up and serving."""
    deadline = time.monotonic() + 20
    with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
        while True:
            assert site.process.poll() is None, f"gunicorn exited: {site.log.read_text()}"
            try:
                pids = set(pool.map(lambda _: site.get(f"/?wait={HOLD_MS}")["pid"], [1, 2]))
            except OSError:
                pids = set()
            if len(pids) == WORKERS:
                return
            assert time.monotonic() < deadline, f"gunicorn's workers: {site.log.read_text()}"
            time.sleep(0.05)


@pytest.fixture
def site(seawall_server_factory: Any, tmp_path: Path) -> Iterator[Site]:
    try:
        import gunicorn  # noqa: F401
    except ImportError:
        pytest.fail("gunicorn is missing: pip install -e '.[dev]'")
    server = seawall_server_factory()
    with sessionapps.free_socket() as sock:
        port = sock.getsockname()[1]
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(HERE), *sys.path]),
        DJANGO_SETTINGS_MODULE="djangosite.settings",
        DJANGOSITE_REDIS_URL=server.url,
        DJANGOSITE_DB=str(tmp_path / "site.sqlite3"),
    )
    log = tmp_path / "gunicorn.log"
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        f"--workers={WORKERS}",
        "--worker-class=sync",
        f"--bind=127.0.0.1:{port}",
        "djangosite.wsgi:application",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    site = Site(f"http://127.0.0.1:{port}", process, log)
    try:
        _wait_for_both_workers(site)
        yield site
    finally:
        process.terminate()  # gunicorn's graceful stop: the workers finish and exit
        process.wait(15)


def _on_both_workers(driver: Any, *paths: str) -> list[Any]:
    """Two requests sent together by the page, each held HOLD_MS in its worker: one
    lands on each worker."""
    separator = ["&" if "?" in path else "?" for path in paths]
    urls = [f"{p}{s}wait={HOLD_MS}" for p, s in zip(paths, separator, strict=True)]
    answers = fetch_all(driver, urls)
    assert len({answer["pid"] for answer in answers}) == WORKERS, answers
    return answers


def test_a_browser_session_across_two_gunicorn_workers(site: Site, chromium: Any) -> None:
    assert page_json(chromium, f"{site.base}/")["now"] == {}
    assert chromium.get_cookie(COOKIE) is None, "an untouched session sets no cookie"

    page_json(chromium, f"{site.base}/put?cart=3")
    anonymous = chromium.get_cookie(COOKIE)["value"]
    for answer in _on_both_workers(chromium, "/", "/"):
        assert answer["now"] == {"cart": "3"}

    # Two requests of one user, overlapping on the two workers, each changing its own key
    # of the session it read before the other wrote: both writes are kept.
    answers = _on_both_workers(chromium, "/put?a=1", "/put?b=2")
    assert [answer["seen"] for answer in answers] == [{"cart": "3"}] * 2
    assert page_json(chromium, f"{site.base}/")["now"] == {"cart": "3", "a": "1", "b": "2"}

    # Login: a new id for the same data; the old one is gone from Redis.
    page_json(chromium, f"{site.base}/login?user=alice")
    cookie = chromium.get_cookie(COOKIE)
    assert cookie["value"] != anonymous and cookie["httpOnly"]
    assert COOKIE not in chromium.execute_script("return document.cookie")
    for answer in _on_both_workers(chromium, "/", "/"):
        assert answer["now"] == {"cart": "3", "a": "1", "b": "2", "user": "alice"}
    assert site.get("/", cookie=anonymous)["now"] == {}, "the pre-login id still works"
    assert site.get("/", cookie=cookie["value"])["now"]["user"] == "alice"

    # Logout: the cookie goes, and the session with it on the server.
    page_json(chromium, f"{site.base}/logout")
    assert chromium.get_cookie(COOKIE) is None
    for answer in _on_both_workers(chromium, "/", "/"):
        assert answer["now"] == {}
    assert site.get("/", cookie=cookie["value"])["now"] == {}, "logged out, still in Redis"
