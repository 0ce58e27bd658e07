"""A private PostgreSQL with logical decoding on, for the change-log follower's tests.

A `DaemonProcess`: its own temporary directory, a free 127.0.0.1 port claimed across
processes, its own session so kill() reaches the postmaster and its backends, the
watchdog sidecar as the backstop. The postmaster is run directly (no pg_ctl), so the
process we hold is the server. PostgreSQL refuses to run as root, so as root initdb and
postgres run as the `postgres` user, which then owns the directory.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
from collections.abc import Sequence

from seawall.errors import ServerNotFoundError
from seawall.launcher._daemon import DaemonProcess, is_executable
from seawall.launcher._ports import HOST, ServerStartError

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


class PostgresNotFoundError(ServerStartError, ServerNotFoundError):
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
        if all(is_executable(os.path.join(directory, b)) for b in ("initdb", "postgres")):
            return directory
    raise PostgresNotFoundError(
        f"no initdb/postgres binaries found (looked in SEAWALL_PG_BIN, pg_config --bindir, "
        f"/usr/lib/postgresql/*/bin, PATH): {INSTALL_HINT}"
    )


def _version_key(path: str) -> tuple[int, ...]:
    part = path.split("/")[-2]
    return tuple(int(p) for p in part.split(".") if p.isdigit())


class PostgresProcess(DaemonProcess):
    """One PostgreSQL server on 127.0.0.1, wal_level=logical, superuser `postgres`
    without a password (trust on loopback). kill() + restart() is a crash and reboot."""

    KIND = "postgres"
    LOG_NAME = "postgres.log"
    # Fast shutdown (SIGINT) rolls back, checkpoints and waits for the walsenders.
    STOP_TIMEOUT = 15.0
    ADDRESS_IN_USE = ("Address already in use",)

    def __init__(
        self,
        *,
        bindir: str | None = None,
        start_timeout: float = 30.0,
        settings: Sequence[str] = (),
    ) -> None:
        # On disk, not in /dev/shm: a container's /dev/shm is often 64 MB, less than a
        # cluster with a few WAL segments, and fsync=off already makes the disk cheap.
        super().__init__(start_timeout=start_timeout, in_memory=False)
        self.bindir = bindir if bindir is not None else find_postgres_bindir()
        # "name=value" settings after the defaults, which they override (wal_level=replica
        # makes a server the follower must refuse). Read at every launch: set it, restart().
        self.settings = (*_SETTINGS, *settings)

    def url(self, dbname: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{user}@{HOST}:{self.port}/{dbname}"

    def dsn(self, dbname: str = "postgres", user: str = "postgres") -> str:
        return f"host={HOST} port={self.port} dbname={dbname} user={user}"

    # -- DaemonProcess hooks -------------------------------------------------------------

    def _run_as(self) -> pwd.struct_passwd | None:
        if os.geteuid() != 0:
            return None
        try:
            return pwd.getpwnam("postgres")
        except KeyError:
            raise ServerStartError(
                "PostgreSQL refuses to run as root and there is no `postgres` user: "
                f"{INSTALL_HINT}, or run the tests as another user"
            ) from None

    def _prepare(self) -> None:
        initdb = [
            os.path.join(self.bindir, "initdb"),
            "-D", self.data_dir,
            "-U", "postgres",
            "--auth=trust",
            "--no-sync",
            "-E", "UTF8",
            "--locale=C",
        ]  # fmt: skip
        self._run_tool(initdb)

    def _argv(self) -> list[str]:
        argv = [
            os.path.join(self.bindir, "postgres"),
            "-D", self.data_dir,
            "-p", str(self.port),
            "-h", HOST,
            "-k", self.directory,
        ]  # fmt: skip
        for setting in self.settings:
            argv += ["-c", setting]
        return argv

    def _answers(self) -> bool:
        ready = os.path.join(self.bindir, "pg_isready")
        check = subprocess.run(
            [ready, "-q", "-h", HOST, "-p", str(self.port), "-t", "1"], check=False
        )
        return check.returncode == 0

    def _ask_to_stop(self, proc: subprocess.Popen[bytes]) -> None:
        # The postmaster alone: it stops its backends in order; SIGTERM to the group
        # would be a smart shutdown of the postmaster and a hard stop of every backend.
        os.kill(proc.pid, signal.SIGINT)
