"""Bad input for every operations command: one line on stderr, a non-zero exit, no
traceback; and `seawall slot` checked against a real Cluster's CLUSTER KEYSLOT."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from seawall.launcher import pick_free_port
from tests.ops._run import one_line_error, seawall

SRC = Path(__file__).resolve().parents[2] / "src"
COMMANDS = [
    ["stats"],
    ["bigkeys"],
    ["hotkeys"],
    ["delete", "--pattern", "x*", "--yes"],
    ["doctor"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_unreachable_server_and_bad_url(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    port = pick_free_port()  # nothing listens there
    error = one_line_error(
        seawall(capsys, args[0], f"redis://127.0.0.1:{port}", *args[1:]), args[0]
    )
    assert f"cannot reach redis://127.0.0.1:{port}" in error
    error = one_line_error(seawall(capsys, args[0], "http://example.com", *args[1:]), args[0])
    assert "is not a server URL" in error


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_wrong_password(
    args: list[str], capsys: pytest.CaptureFixture[str], password_server: Any
) -> None:
    url = f"redis://:wrong@127.0.0.1:{password_server.port}/0"
    assert "refused the login" in one_line_error(seawall(capsys, args[0], url, *args[1:]), args[0])
    no_password = f"redis://127.0.0.1:{password_server.port}/0"
    error = one_line_error(seawall(capsys, args[0], no_password, *args[1:]), args[0])
    assert "USER:PASSWORD" in error


@pytest.fixture(scope="module")
def password_server() -> Any:
    from seawall.launcher import ServerProcess

    server = ServerProcess(extra_args=["--requirepass", "right"]).start()
    yield server
    server.stop()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["bigkeys", "URL", "--top", "0"], "--top"),
        (["bigkeys", "URL", "--type", "blob"], "--type"),
        (["bigkeys", "URL", "--cursor", "abc"], "--cursor 'abc' is not a SCAN cursor"),
        (["stats", "URL", "--watch", "1", "--json"], "--watch"),
        (["delete", "URL"], "--pattern"),
        (["doctor", "URL", "--explain", "SD999"], "unknown rule SD999"),
    ],
)
def test_bad_options(
    args: list[str], says: str, seawall_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = seawall(capsys, *[seawall_url if a == "URL" else a for a in args])
    assert run.code != 0 and "Traceback" not in run.err
    assert says in run.err


def test_slot_matches_cluster_keyslot(
    seawall_cluster: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = ["foo", "user:{42}:cart", "{42}", "{}x", "a{b}c{d}", "\u00e9t\u00e9", "x" * 300]
    run = seawall(capsys, "slot", *keys, "--json")
    assert run.code == 0, run.err
    client = seawall_cluster.nodes[0].client()
    for row, key in zip(run.json(), keys, strict=True):
        assert row["slot"] == client.execute_command("CLUSTER", "KEYSLOT", key), key
    assert run.json()[1]["hash_tag"] == "42" and run.json()[3]["hash_tag"] is None
    client.close()
    table = seawall(capsys, "slot", "user:{42}:cart", "odd:[/b]")
    assert "8000" in table.out and "42" in table.out
    assert "odd:[/b]" in table.out  # key names are never read as rich markup


def test_start_up_in_a_real_process() -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    port = pick_free_port()
    done = subprocess.run(
        [sys.executable, "-m", "seawall", "stats", f"redis://127.0.0.1:{port}"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"seawall stats: cannot reach redis://127.0.0.1:{port}")
    assert len(done.stderr.splitlines()) == 1
    slot = subprocess.run(
        [sys.executable, "-m", "seawall", "slot", "foo", "--json"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert slot.returncode == 0 and '"slot": 12182' in slot.stdout


class _Peer:
    """A TCP listener on a free loopback port that is not a Redis server: it answers every
    connection with `reply` (and closes it), or, when `reply` is None, never answers."""

    def __init__(self, reply: bytes | None) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.reply is None:
                self.held.append(conn)  # silent: a TLS client waits for its handshake
                continue
            with contextlib.suppress(OSError):
                conn.recv(1024)
                conn.sendall(self.reply)
            conn.close()

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_a_port_that_is_not_redis_is_named_in_one_line(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    http = _Peer(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    try:
        url = f"redis://127.0.0.1:{http.port}"
        error = one_line_error(seawall(capsys, args[0], url, *args[1:]), args[0])
        assert "does not speak the Redis protocol" in error and "check the host and port" in error
    finally:
        http.close()
    closing = _Peer(b"")
    try:
        url = f"redis://127.0.0.1:{closing.port}"
        error = one_line_error(seawall(capsys, args[0], url, *args[1:]), args[0])
        assert "closed the connection" in error and "rediss://" in error
    finally:
        closing.close()


def test_tls_url_to_a_plain_server_fails_within_the_connect_timeout(
    capsys: pytest.CaptureFixture[str],
) -> None:
    silent = _Peer(None)  # a plain Redis waits for a command as this does: no handshake
    try:
        started = time.monotonic()
        run = seawall(capsys, "stats", f"rediss://127.0.0.1:{silent.port}")
        took = time.monotonic() - started
    finally:
        silent.close()
    error = one_line_error(run, "stats")
    assert "no TLS handshake" in error and "redis:// for a plain server" in error
    assert "busy" not in error
    assert took < 20, took  # the 5 s connect timeout, not the 30 s of a busy server
