"""A private MariaDB server on a free loopback port, with a row binlog, for the CDC tests.

Started the way the Redis servers are: its own temporary directory (datadir, socket,
error log), 127.0.0.1 only, a port claimed through `_ports`, the process group watched by
the sidecar so a SIGKILLed test run leaves nothing behind. `kill()` + `restart()` behave
like a crash and reboot: same datadir, same port, binlog intact.

The binaries come from SEAWALL_MARIADB_BIN (a directory, or the mariadbd path), then
PATH, then /usr/sbin and /usr/bin (Debian puts mariadbd in sbin, the tools in bin).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Self

from seawall.errors import ServerNotFoundError
from seawall.launcher import _watchdog
from seawall.launcher._ports import HOST, ServerStartError, pick_free_port, release_port

__all__ = ["ENV_VAR", "MariaDBBinaries", "MariaDBProcess", "find_mariadb_binaries"]

ENV_VAR = "SEAWALL_MARIADB_BIN"
_INSTALL_HINT = (
    "install MariaDB (Debian: apt-get install mariadb-server), or set "
    f"{ENV_VAR} to the directory holding mariadbd"
)
_FALLBACK_DIRS = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin")
_STOP_TIMEOUT = 10.0
_PORT_ATTEMPTS = 5
_ADDRESS_IN_USE = ("Address already in use", "Do you already have another")

# Durability is worth nothing in a throwaway test server; start-up and commit speed are.
_SPEED_ARGS = (
    "--innodb-flush-log-at-trx-commit=2",
    "--sync-binlog=0",
    "--innodb-buffer-pool-size=16M",
    "--innodb-log-file-size=16M",
    "--innodb-doublewrite=0",
    "--performance-schema=OFF",
    "--max-connections=200",
)


class MariaDBBinaries:
    """mariadbd and mariadb-install-db, found together."""

    def __init__(self, server: str, install_db: str) -> None:
        self.server = server
        self.install_db = install_db


def find_mariadb_binaries() -> MariaDBBinaries:
    """The binaries to launch, or ServerNotFoundError naming the package to install."""
    search: list[str] = []
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        base = explicit if os.path.isdir(explicit) else os.path.dirname(explicit)
        # Debian splits the server (sbin) from the tools (bin): look beside both.
        parent = os.path.dirname(base.rstrip("/"))
        search += [base, os.path.join(parent, "sbin"), os.path.join(parent, "bin")]
    search += os.environ.get("PATH", "").split(os.pathsep)
    search += _FALLBACK_DIRS
    server = _first(("mariadbd", "mysqld"), search)
    install_db = _first(("mariadb-install-db", "mysql_install_db"), search)
    if server is None or install_db is None:
        missing = "mariadbd" if server is None else "mariadb-install-db"
        raise ServerNotFoundError(f"no {missing} binary found: {_INSTALL_HINT}")
    return MariaDBBinaries(server, install_db)


def _first(names: Sequence[str], directories: Sequence[str]) -> str | None:
    for name in names:
        for directory in directories:
            path = os.path.join(directory, name)
            if directory and os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    return None


class MariaDBProcess:
    """A mariadbd bound to 127.0.0.1, user root without a password, binlog in ROW format.

    `log_bin=False` starts it without a binary log; `extra_args` are appended to the
    command line (later options win, e.g. ``--binlog-format=STATEMENT``).
    """

    def __init__(
        self,
        *,
        binaries: MariaDBBinaries | None = None,
        log_bin: bool = True,
        extra_args: Sequence[str] = (),
        start_timeout: float = 30.0,
    ) -> None:
        self.binaries = binaries if binaries is not None else find_mariadb_binaries()
        self.log_bin = log_bin
        self.extra_args = list(extra_args)
        self.start_timeout = start_timeout
        self._port: int | None = None
        self._dir: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return HOST

    @property
    def port(self) -> int:
        if self._port is None:
            raise ServerStartError("MariaDB has no port yet: call start() first")
        return self._port

    @property
    def directory(self) -> str:
        if self._dir is None:
            raise ServerStartError("MariaDB has no directory yet: call start() first")
        return self._dir

    @property
    def socket_path(self) -> str:
        return os.path.join(self.directory, "mysqld.sock")

    @property
    def log_path(self) -> str:
        return os.path.join(self.directory, "error.log")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def url(self, database: str, user: str = "root", password: str = "") -> str:
        """A ``mariadb://`` SOURCE_URL for `database` on this server."""
        auth = f"{user}:{password}" if password else user
        return f"mariadb://{auth}@{HOST}:{self.port}/{database}"

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Self:
        """Install a datadir, launch, and return once the server accepts connections."""
        if self.running:
            return self
        if self._dir is not None:
            return self.restart()
        self._dir = tempfile.mkdtemp(prefix="seawall-mariadb-")
        with _live_lock:
            _live.add(self)
        self._install()
        for attempt in range(_PORT_ATTEMPTS):
            self._port = pick_free_port()
            self._launch()
            try:
                self._await_ready()
                return self
            except _PortRace:
                release_port(self._port)
                self._port = None
                if attempt + 1 == _PORT_ATTEMPTS:
                    break
        self.stop()
        raise ServerStartError(f"every port tried on {HOST} was taken by another process")

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; the datadir stays for `restart()`."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        _watchdog.unwatch(proc.pid)

    def restart(self) -> Self:
        """Stop (if running) and start again on the same port and datadir."""
        if self._dir is None:
            return self.start()
        self._terminate()
        self._launch()
        try:
            self._await_ready()
        except _PortRace:
            raise ServerStartError(
                f"port {self._port} on {HOST} was taken while MariaDB was down"
            ) from None
        return self

    def stop(self) -> None:
        """Shut the server down and delete its directory."""
        self._terminate()
        self._proc = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        if self._port is not None:
            release_port(self._port)
            self._port = None
        with _live_lock:
            _live.discard(self)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<MariaDBProcess {HOST}:{self._port} {state}>"

    # -- internals -----------------------------------------------------------------------

    def _user_args(self) -> list[str]:
        # mariadbd refuses to run as root unless told to: CI runs as root.
        return ["--user=root"] if os.geteuid() == 0 else []

    def _install(self) -> None:
        datadir = os.path.join(self.directory, "data")
        argv = [
            self.binaries.install_db,
            "--no-defaults",
            f"--datadir={datadir}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            *self._user_args(),
            *_SPEED_ARGS,
        ]
        done = subprocess.run(argv, capture_output=True, timeout=120, check=False)
        if done.returncode != 0:
            output = (done.stdout + done.stderr).decode("utf-8", "replace")[-2000:]
            raise ServerStartError(
                f"{self.binaries.install_db} exited with code {done.returncode}:\n{output}"
            )

    def _argv(self) -> list[str]:
        argv = [
            self.binaries.server,
            "--no-defaults",
            f"--datadir={os.path.join(self.directory, 'data')}",
            f"--socket={self.socket_path}",
            f"--port={self.port}",
            f"--bind-address={HOST}",
            f"--pid-file={os.path.join(self.directory, 'mysqld.pid')}",
            f"--log-error={self.log_path}",
            "--server-id=1",
            "--skip-name-resolve",
            *self._user_args(),
            *_SPEED_ARGS,
        ]
        if self.log_bin:
            argv += [
                f"--log-bin={os.path.join(self.directory, 'data', 'binlog')}",
                "--binlog-format=ROW",
                "--binlog-row-image=FULL",
                "--binlog-row-metadata=FULL",
            ]
        return argv + self.extra_args

    def _launch(self) -> None:
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(
                self._argv(),
                cwd=self.directory,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _watchdog.watch(self._proc.pid, self.directory)

    def _await_ready(self) -> None:
        proc = self._proc
        assert proc is not None
        deadline = time.monotonic() + self.start_timeout
        delay = 0.01
        while True:
            code = proc.poll()
            if code is not None:
                _watchdog.unwatch(proc.pid)
                tail = self.log_tail()
                if any(marker in tail for marker in _ADDRESS_IN_USE):
                    raise _PortRace
                raise ServerStartError(
                    f"{self.binaries.server} exited with code {code} before accepting "
                    f"connections on {HOST}:{self._port}; last lines of "
                    f"{self.log_path}:\n{tail}"
                )
            # The unix socket is ours alone: a stranger on the TCP port cannot answer there.
            if _greets(self.socket_path) and _tcp_open(self.port):
                return
            if time.monotonic() > deadline:
                self.kill()
                raise ServerStartError(
                    f"{self.binaries.server} did not accept connections on {HOST}:"
                    f"{self._port} within {self.start_timeout:g}s; last lines of "
                    f"{self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.1)

    def _terminate(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                proc.wait(_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.kill()
        _watchdog.unwatch(proc.pid)

    def log_tail(self, lines: int = 30) -> str:
        """The last `lines` lines of the error log, for error messages."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(0, os.SEEK_END)
                log.seek(max(0, log.tell() - 16384))
                text = log.read().decode("utf-8", "replace")
        except (OSError, ServerStartError) as exc:
            return f"(log unreadable: {exc})"
        return "\n".join(text.splitlines()[-lines:])


class _PortRace(Exception):
    """Another process took the port between choosing it and mariadbd binding it."""


def _greets(path: str) -> bool:
    """True if a server on unix socket `path` sends its handshake (protocol 10)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.5)
            sock.connect(path)
            header = sock.recv(5)
    except OSError:
        return False
    # 3-byte length, sequence 0, then the protocol version byte (10).
    return len(header) == 5 and header[3] == 0 and header[4] == 10


def _tcp_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


_live: set[MariaDBProcess] = set()
_live_lock = threading.Lock()


@atexit.register
def _stop_leftovers() -> None:
    # A server a caller never stopped (Ctrl-C, a failing fixture) must not outlive us.
    with _live_lock:
        leftovers = list(_live)
    for server in leftovers:
        server.stop()
