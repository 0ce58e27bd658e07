"""A private MariaDB server on a free loopback port, with a row binlog, for the CDC tests.

A `DaemonProcess`: its own temporary directory (datadir, socket, error log), 127.0.0.1
only, a port claimed through `_ports` (and another one tried if a stranger takes it
before mariadbd binds), the process group watched by the sidecar so a SIGKILLed test run
leaves nothing behind. `kill()` + `restart()` behave like a crash and reboot: same
datadir, same port, binlog intact.

The binaries come from SEAWALL_MARIADB_BIN (a directory, or the mariadbd path), then
PATH, then /usr/sbin and /usr/bin (Debian puts mariadbd in sbin, the tools in bin).
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Sequence

from seawall.errors import ServerNotFoundError
from seawall.launcher._daemon import DaemonProcess, first_executable
from seawall.launcher._ports import HOST

__all__ = ["ENV_VAR", "MariaDBBinaries", "MariaDBProcess", "find_mariadb_binaries"]

ENV_VAR = "SEAWALL_MARIADB_BIN"
_INSTALL_HINT = (
    "install MariaDB (Debian: apt-get install mariadb-server), or set "
    f"{ENV_VAR} to the directory holding mariadbd"
)
_FALLBACK_DIRS = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin")

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
    server = first_executable(("mariadbd", "mysqld"), search)
    install_db = first_executable(("mariadb-install-db", "mysql_install_db"), search)
    if server is None or install_db is None:
        missing = "mariadbd" if server is None else "mariadb-install-db"
        raise ServerNotFoundError(f"no {missing} binary found: {_INSTALL_HINT}")
    return MariaDBBinaries(server, install_db)


class MariaDBProcess(DaemonProcess):
    """A mariadbd bound to 127.0.0.1, user root without a password, binlog in ROW format.

    `log_bin=False` starts it without a binary log; `extra_args` are appended to the
    command line (later options win, e.g. ``--binlog-format=STATEMENT``).
    """

    KIND = "mariadb"
    LOG_NAME = "error.log"
    STOP_TIMEOUT = 10.0
    ADDRESS_IN_USE = ("Address already in use", "Do you already have another")

    def __init__(
        self,
        *,
        binaries: MariaDBBinaries | None = None,
        log_bin: bool = True,
        extra_args: Sequence[str] = (),
        start_timeout: float = 30.0,
    ) -> None:
        # On disk, not in /dev/shm: a datadir with redo log and binlogs would crowd a
        # container's small one, and its speed settings already spare the disk.
        super().__init__(start_timeout=start_timeout, in_memory=False)
        self.binaries = binaries if binaries is not None else find_mariadb_binaries()
        self.log_bin = log_bin
        self.extra_args = list(extra_args)

    @property
    def socket_path(self) -> str:
        return os.path.join(self.directory, "mysqld.sock")

    def url(self, database: str, user: str = "root", password: str = "") -> str:
        """A ``mariadb://`` SOURCE_URL for `database` on this server."""
        auth = f"{user}:{password}" if password else user
        return f"mariadb://{auth}@{HOST}:{self.port}/{database}"

    # -- DaemonProcess hooks -------------------------------------------------------------

    def _user_args(self) -> list[str]:
        # mariadbd refuses to run as root unless told to: CI runs as root.
        return ["--user=root"] if os.geteuid() == 0 else []

    def _prepare(self) -> None:
        self._run_tool(
            [
                self.binaries.install_db,
                "--no-defaults",
                f"--datadir={self.data_dir}",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                *self._user_args(),
                *_SPEED_ARGS,
            ]
        )

    def _argv(self) -> list[str]:
        argv = [
            self.binaries.server,
            "--no-defaults",
            f"--datadir={self.data_dir}",
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
                f"--log-bin={os.path.join(self.data_dir, 'binlog')}",
                "--binlog-format=ROW",
                "--binlog-row-image=FULL",
                "--binlog-row-metadata=FULL",
            ]
        return argv + self.extra_args

    def _answers(self) -> bool:
        # The unix socket is ours alone: a stranger on the TCP port cannot answer there.
        return _greets(self.socket_path) and _tcp_open(self.port)

    def _ask_to_stop(self, proc: subprocess.Popen[bytes]) -> None:
        proc.terminate()  # mariadbd alone: it shuts its threads down in order


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
