"""A private standalone ZooKeeper on a free loopback port, for tests and benchmarks of
`seawall.zookeeper`. Debian/Ubuntu ship it as the `zookeeper` package (a jar under
/usr/share/java whose manifest names its dependencies) and Java as `default-jre-headless`.
"""

from __future__ import annotations

import os
import socket

from seawall.launcher._daemon import DaemonProcess, find_binary
from seawall.launcher._ports import HOST

PACKAGE = "zookeeper"
ENV_VAR = "SEAWALL_ZOOKEEPER_JAR"
_JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/zookeeper/zookeeper.jar")
_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

# ZooKeeper grants a client's session timeout within [2, 20] ticks; a short tick lets the
# tests ask for sessions of one or two seconds.
TICK_MS = 200


def find_jar() -> str:
    from seawall.errors import ServerNotFoundError

    for jar in (os.environ.get(ENV_VAR, ""), *_JARS):
        if jar and os.path.isfile(jar):
            return jar
    raise ServerNotFoundError(
        f"no ZooKeeper jar found (looked for {', '.join(_JARS)}): install it with "
        f"`apt-get install -y {PACKAGE}` (Debian/Ubuntu), or set {ENV_VAR}"
    )


class ZooKeeperProcess(DaemonProcess):
    """ZooKeeper standalone (`QuorumPeerMain` with a one-server config), admin server off.

    `hosts` is its connection string (`127.0.0.1:PORT`). Sessions may be 2 to 20 ticks
    of TICK_MS ms: 0.4 s to 4 s by default (`max_session_timeout` raises the upper end).
    """

    KIND = "zookeeper"
    PORTS = 1

    def __init__(
        self,
        *,
        jar: str | None = None,
        java: str | None = None,
        max_session_timeout: float = 60.0,
        start_timeout: float = 60.0,
    ) -> None:
        super().__init__(start_timeout=start_timeout)
        self.jar = jar or find_jar()
        self.java = java or find_binary(["java", "/usr/bin/java"], "default-jre-headless", "java")
        self.max_session_timeout = max_session_timeout

    @property
    def hosts(self) -> str:
        return f"{HOST}:{self.port}"

    def _prepare(self) -> None:
        data = self.data_dir
        os.makedirs(data, exist_ok=True)
        config = {
            "tickTime": TICK_MS,
            "dataDir": data,
            "clientPort": self.port,
            "clientPortAddress": HOST,
            "maxClientCnxns": 0,
            "admin.enableServer": "false",
            "minSessionTimeout": 2 * TICK_MS,
            "maxSessionTimeout": int(self.max_session_timeout * 1000),
            "4lw.commands.whitelist": "ruok,srvr",
            # A test server need not survive a power cut; fsyncs would dominate writes.
            "forceSync": "no",
        }
        with open(os.path.join(self.directory, "zoo.cfg"), "w") as out:
            out.writelines(f"{key}={value}\n" for key, value in config.items())

    def _argv(self) -> list[str]:
        return [
            self.java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # starts in about 0.2 s instead of 1-2 s
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp", self.jar,
            _MAIN,
            os.path.join(self.directory, "zoo.cfg"),
        ]  # fmt: skip

    def _answers(self) -> bool:
        try:
            with socket.create_connection((HOST, self.port), timeout=0.5) as sock:
                sock.sendall(b"ruok")
                return sock.recv(16) == b"imok"
        except OSError:
            return False


__all__ = ["PACKAGE", "ZooKeeperProcess", "find_jar"]
