"""A private PostgreSQL with logical decoding on, for the change-log follower's tests.

Started the way the Redis servers are (see _process.py): its own temporary directory, a
free 127.0.0.1 port claimed across processes, its own session so kill() reaches it, the
watchdog sidecar as the backstop. PostgreSQL refuses to run as root, so as root every
binary runs as the `postgres` user, which then owns the directory.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Self

from seawall.launcher import _watchdog
from seawall.launcher._ports import HOST, ServerStartError, pick_free_port, release_port

__all__ = ["PostgresNotFoundError", "PostgresProcess", "find_postgres_bindir"]

INSTALL_HINT = "install PostgreSQL (Debian: apt-get install postgresql)"

# Logical decoding needs wal_level=logical; the rest trades durability for speed, which a
# throwaway test server can afford (fsync off), and keeps keepalives frequent enough that
# a test sees an idle slot move within seconds. Not synchronous_commit=off: a walsender
# sends only flushed WAL, so commits would reach the follower up to wal_writer_delay
# (200 ms) late, unlike a production server.
_SETTINGS = (
    "wal_level=logical",
    "max_replication_slots=20",
    "max_wal_senders=20",
    "fsync=off",
    "full_page_writes=off",
    "wal_sender_timeout=10s",
    "max_connections=100",
    "shared_buffers=16MB",
)


class PostgresNotFoundError(ServerStartError):
    """No initdb/postgres binaries were found."""


def find_postgres_bindir() -> str:
    """The directory holding initdb and postgres: SEAWALL_PG_BIN, `pg_config --bindir`,
    /usr/lib/postgresql/*/bin (newest first), then PATH."""
    candidates: list[str] = []
    if os.environ.get("SEAWALL_PG_BIN"):
        candidates.append(os.environ["SEAWALL_PG_BIN"])
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            )
            candidates.append(out.stdout.strip())
    versions = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += sorted(versions, key=_version_key, reverse=True)
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(os.path.dirname(initdb))
    for directory in candidates:
        if all(os.access(os.path.join(directory, b), os.X_OK) for b in ("initdb", "postgres")):
            return directory
    raise PostgresNotFoundError(
        f"no initdb/postgres binaries found (looked in SEAWALL_PG_BIN, pg_config --bindir, "
        f"/usr/lib/postgresql/*/bin, PATH): {INSTALL_HINT}"
    )


def _version_key(path: str) -> tuple[int, ...]:
    part = path.split("/")[-2]
    return tuple(int(p) for p in part.split(".") if p.isdigit())


def _as_postgres() -> tuple[Callable[[], None] | None, int | None]:
    """(preexec_fn, uid): drop root to the `postgres` user, which PostgreSQL requires."""
    if os.geteuid() != 0:
        return None, None
    try:
        user = pwd.getpwnam("postgres")
    except KeyError:
        raise ServerStartError(
            "PostgreSQL refuses to run as root and there is no `postgres` user: "
            f"{INSTALL_HINT}, or run the tests as another user"
        ) from None

    def demote() -> None:
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)

    return demote, user.pw_uid


class PostgresProcess:
    """One PostgreSQL server on 127.0.0.1, wal_level=logical, superuser `postgres`
    without a password (trust on loopback). kill() + restart() is a crash and reboot."""

    def __init__(
        self,
        *,
        bindir: str | None = None,
        start_timeout: float = 30.0,
        settings: Sequence[str] = (),
    ) -> None:
        self.bindir = bindir if bindir is not None else find_postgres_bindir()
        # "name=value" settings after the defaults, which they override (wal_level=replica
        # makes a server the follower must refuse).
        self.settings = (*_SETTINGS, *settings)
        self.start_timeout = start_timeout
        self._dir: str | None = None
        self._port: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise ServerStartError("PostgreSQL has no port yet: call start() first")
        return self._port

    @property
    def host(self) -> str:
        return HOST

    @property
    def directory(self) -> str:
        if self._dir is None:
            raise ServerStartError("PostgreSQL has no directory yet: call start() first")
        return self._dir

    @property
    def data_dir(self) -> str:
        return os.path.join(self.directory, "data")

    @property
    def log_path(self) -> str:
        return os.path.join(self.directory, "postgres.log")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def url(self, dbname: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{user}@{HOST}:{self.port}/{dbname}"

    def dsn(self, dbname: str = "postgres", user: str = "postgres") -> str:
        return f"host={HOST} port={self.port} dbname={dbname} user={user}"

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Self:
        if self.running:
            return self
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="seawall-postgres-")
            self._initdb()
        if self._port is None:
            self._port = pick_free_port()
        self._launch()
        return self

    def kill(self) -> None:
        """SIGKILL the postmaster and its children, as a crash would; data stays."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        _watchdog.unwatch(proc.pid)
        # Backends are in the postmaster's group, but a straggler must not keep the port.
        self._wait_port_closed()

    def restart(self) -> Self:
        """Stop (fast shutdown) if running, then start on the same port and data."""
        self._shutdown()
        self._launch()
        return self

    def stop(self) -> None:
        """Shut down and delete the directory."""
        self._shutdown()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        if self._port is not None:
            release_port(self._port)
            self._port = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals -----------------------------------------------------------------------

    def _initdb(self) -> None:
        demote, uid = _as_postgres()
        if uid is not None:
            os.chown(self.directory, uid, -1)
        result = subprocess.run(
            [
                os.path.join(self.bindir, "initdb"),
                "-D",
                self.data_dir,
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
            ],
            capture_output=True,
            preexec_fn=demote,
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            raise ServerStartError(
                f"initdb failed with code {result.returncode}: "
                f"{result.stderr.decode(errors='replace').strip()[-2000:]}"
            )

    def _launch(self) -> None:
        demote, _uid = _as_postgres()
        argv = [
            os.path.join(self.bindir, "postgres"),
            "-D", self.data_dir,
            "-p", str(self.port),
            "-h", HOST,
            "-k", self.directory,
        ]  # fmt: skip
        for setting in self.settings:
            argv += ["-c", setting]
        with open(self.log_path, "ab") as log:
            if demote is not None:
                os.chown(self.log_path, pwd.getpwnam("postgres").pw_uid, -1)
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=demote,
                start_new_session=True,
            )
        _watchdog.watch(self._proc.pid, self.directory)
        self._await_ready()

    def _await_ready(self) -> None:
        proc = self._proc
        assert proc is not None
        deadline = time.monotonic() + self.start_timeout
        ready = os.path.join(self.bindir, "pg_isready")
        while True:
            if proc.poll() is not None:
                _watchdog.unwatch(proc.pid)
                raise ServerStartError(
                    f"postgres exited with code {proc.returncode} before accepting "
                    f"connections on {HOST}:{self._port}; last lines of {self.log_path}:\n"
                    f"{self.log_tail()}"
                )
            check = subprocess.run(
                [ready, "-q", "-h", HOST, "-p", str(self.port), "-t", "1"], check=False
            )
            if check.returncode == 0:
                return
            if time.monotonic() > deadline:
                self.kill()
                raise ServerStartError(
                    f"postgres did not accept connections on {HOST}:{self._port} within "
                    f"{self.start_timeout:g}s; last lines of {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def _shutdown(self) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGINT)  # fast shutdown: roll back, checkpoint
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        _watchdog.unwatch(proc.pid)
        self._proc = None

    def _wait_port_closed(self) -> None:
        pid_file = os.path.join(self.data_dir, "postmaster.pid")
        deadline = time.monotonic() + 5
        # A killed postmaster leaves its pid file; postgres itself handles a stale one.
        while time.monotonic() < deadline and os.path.exists(pid_file):
            try:
                with open(pid_file) as f:
                    os.kill(int(f.readline().strip() or 0), 0)
            except (OSError, ValueError):
                return
            time.sleep(0.02)

    def log_tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_path, "rb") as log:
                text = log.read().decode("utf-8", "replace")
        except OSError as exc:
            return f"(log unreadable: {exc})"
        return "\n".join(text.splitlines()[-lines:])
