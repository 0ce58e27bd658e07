"""A private single-member etcd on free loopback ports (client and peer), for tests and
benchmarks of `seawall.etcd`. Debian/Ubuntu ship it as the `etcd-server` package."""

from __future__ import annotations

import functools
import http.client
import os
import subprocess

from seawall.launcher._daemon import DaemonProcess, find_binary
from seawall.launcher._ports import HOST

PACKAGE = "etcd-server"
ENV_VAR = "SEAWALL_ETCD_BIN"


@functools.lru_cache(maxsize=4)
def _has_flag(binary: str, flag: str) -> bool:
    try:
        helptext = subprocess.run(
            [binary, "--help"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return flag in helptext.stdout + helptext.stderr


class EtcdProcess(DaemonProcess):
    """`etcd` with its data in a temporary directory; `endpoint` is its client URL.

    Runs on a RAM-backed directory when the machine has one, and with
    `--unsafe-no-fsync` where the version knows it (3.5+; Debian bookworm's 3.4 does not):
    a test server need not survive a power cut, and fsyncs would dominate every write.
    """

    KIND = "etcd"
    PORTS = 2  # client, peer

    def __init__(self, *, binary: str | None = None, start_timeout: float = 30.0) -> None:
        super().__init__(start_timeout=start_timeout)
        candidates = [binary or os.environ.get(ENV_VAR) or "etcd", "/usr/bin/etcd"]
        self.binary = find_binary(candidates, PACKAGE, "etcd binary")

    @property
    def endpoint(self) -> str:
        """The client URL: http://127.0.0.1:PORT."""
        return f"http://{HOST}:{self.port}"

    def _argv(self) -> list[str]:
        client = f"http://{HOST}:{self.ports[0]}"
        peer = f"http://{HOST}:{self.ports[1]}"
        argv = [
            self.binary,
            "--name", "seawall",
            "--data-dir", self.data_dir,
            "--listen-client-urls", client,
            "--advertise-client-urls", client,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"seawall={peer}",
            "--initial-cluster-state", "new",
            "--log-level", "warn",
            "--logger", "zap",
        ]  # fmt: skip
        if _has_flag(self.binary, "--unsafe-no-fsync"):
            argv.append("--unsafe-no-fsync")
        return argv

    def _answers(self) -> bool:
        # /health says true once the member has a leader and serves reads.
        conn = http.client.HTTPConnection(HOST, self.port, timeout=0.5)
        try:
            conn.request("GET", "/health")
            reply = conn.getresponse()
            return reply.status == 200 and b'"true"' in reply.read()
        except OSError:
            return False
        finally:
            conn.close()
