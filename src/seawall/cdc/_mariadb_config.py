"""Pure parts of the MariaDB/MySQL source: its URL, its positions, its server checks.

No I/O here, so every decision (what a URL means, where a position resumes, which
setting is wrong and what to do about it) is tested without a server.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlsplit

from seawall.cdc._events import SourceError

__all__ = [
    "DEFAULT_PORT",
    "FilePosition",
    "GtidPosition",
    "MariaDBURL",
    "Position",
    "check_settings",
    "parse_position",
    "parse_url",
]

DEFAULT_PORT = 3306
SCHEMES = ("mysql", "mariadb")
# Replica server ids share one 32-bit space with the real replicas of the server; a
# follower picks from the top half, which hand-configured replicas rarely use.
SERVER_ID_MIN = 1
SERVER_ID_MAX = 2**32 - 1
_URL_SHAPE = "mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?server_id=N]"


@dataclass(frozen=True, slots=True)
class MariaDBURL:
    """What a SOURCE_URL says: where the server is, who to be, which database to follow."""

    user: str
    password: str
    host: str
    port: int
    database: str
    server_id: int | None = None
    heartbeat: float = 5.0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def parse_url(url: str) -> MariaDBURL:
    """Parse ``mysql://`` or ``mariadb://`` URLs; SourceError saying the expected shape."""
    parts = urlsplit(url)
    # An application's SQLAlchemy URL (mysql+pymysql://) names the same server.
    parts = parts._replace(scheme=parts.scheme.partition("+")[0].lower())
    if parts.scheme not in SCHEMES:
        raise SourceError(f"not a MariaDB/MySQL URL: {url!r}; expected {_URL_SHAPE}")
    database = unquote(parts.path.lstrip("/"))
    if not parts.hostname or not database or "/" in database:
        raise SourceError(f"{_redacted(url)} names no host or no database; expected {_URL_SHAPE}")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        raise SourceError(f"{_redacted(url)} has a bad port; expected {_URL_SHAPE}") from None
    server_id: int | None = None
    heartbeat = 5.0
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "server_id":
            server_id = _server_id(value, url)
        elif key == "heartbeat":
            heartbeat = _heartbeat(value, url)
        else:
            raise SourceError(
                f"{_redacted(url)}: unknown option {key!r}; known: server_id, heartbeat"
            )
    return MariaDBURL(
        user=unquote(parts.username or "root"),
        password=unquote(parts.password or ""),
        host=parts.hostname,
        port=port,
        database=database,
        server_id=server_id,
        heartbeat=heartbeat,
    )


def _server_id(value: str, url: str) -> int:
    if value.isdigit() and SERVER_ID_MIN <= int(value) <= SERVER_ID_MAX:
        return int(value)
    raise SourceError(
        f"{_redacted(url)}: server_id must be an integer from {SERVER_ID_MIN} to "
        f"{SERVER_ID_MAX}, unique among the server's replicas"
    )


def _heartbeat(value: str, url: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if 0.1 <= seconds <= 3600:
        return seconds
    raise SourceError(f"{_redacted(url)}: heartbeat must be seconds from 0.1 to 3600")


def _redacted(url: str) -> str:
    """The URL without its password, for error messages."""
    return re.sub(r"(://[^:/@]*):[^@/]*@", r"\1:***@", url)


# -- positions -----------------------------------------------------------------------------

_GTID = re.compile(r"^(\d+)-(\d+)-(\d+)$")


@dataclass(frozen=True, slots=True)
class GtidPosition:
    """A MariaDB GTID state: the last transaction done in each replication domain.

    Text form ``gtid:0-1-42`` (several domains: ``gtid:0-1-42,1-2-7``), which is also
    what MariaDB takes as a replica's connect state. It survives binlog rotation,
    restarts and a change of primary, unlike a file offset.
    """

    domains: tuple[tuple[int, int, int], ...]  # (domain, server_id, sequence), by domain

    def __str__(self) -> str:
        return "gtid:" + self.state

    @property
    def state(self) -> str:
        """The ``@slave_connect_state`` value: empty means "from the oldest binlog"."""
        return ",".join(f"{d}-{s}-{n}" for d, s, n in self.domains)

    def advance(self, domain: int, server_id: int, sequence: int) -> GtidPosition:
        """The state once transaction domain-server_id-sequence is done."""
        kept = [entry for entry in self.domains if entry[0] != domain]
        return GtidPosition(tuple(sorted([*kept, (domain, server_id, sequence)])))

    @classmethod
    def from_state(cls, state: str) -> GtidPosition:
        """From ``@@gtid_binlog_pos`` or the text after ``gtid:``; ValueError if malformed."""
        domains: dict[int, tuple[int, int, int]] = {}
        for item in filter(None, (part.strip() for part in state.split(","))):
            match = _GTID.match(item)
            if match is None:
                raise ValueError(item)
            domain, server_id, sequence = (int(group) for group in match.groups())
            if domain in domains:
                raise ValueError(f"domain {domain} twice")
            domains[domain] = (domain, server_id, sequence)
        return cls(tuple(sorted(domains.values())))


@dataclass(frozen=True, slots=True)
class FilePosition:
    """A binlog file and the byte offset just after the last event done.

    Text form ``file:binlog.000003:1234``. Used for MySQL (whose GTID sets seawall does
    not track) and wherever a GTID is not available. A file offset names one server's
    files: after a failover to another server it means nothing there.
    """

    file: str
    offset: int

    def __str__(self) -> str:
        return f"file:{self.file}:{self.offset}"


Position = GtidPosition | FilePosition


def parse_position(text: str) -> Position:
    """Parse a checkpointed position; SourceError naming both accepted forms."""
    kind, _, rest = text.partition(":")
    try:
        if kind == "gtid":
            return GtidPosition.from_state(rest)
        if kind == "file":
            name, _, offset = rest.rpartition(":")
            if name and offset.isdigit() and "/" not in name:
                return FilePosition(name, int(offset))
    except ValueError:
        pass
    raise SourceError(
        f"{text!r} is not a MariaDB/MySQL binlog position; expected gtid:DOMAIN-SERVER-SEQ "
        "(e.g. gtid:0-1-42) or file:NAME:OFFSET (e.g. file:binlog.000003:1234)"
    )


# -- server checks ---------------------------------------------------------------------------

_RESTART = "in my.cnf [mysqld] and restart the server"


def check_settings(variables: Mapping[str, str], where: str) -> str | None:
    """The first server setting that stops the follower, as a one-line fix, or None.

    `variables` are ``SHOW GLOBAL VARIABLES`` names (lower case) and values. Row images
    must be FULL: a MINIMAL delete or update image may omit the columns a cache key is
    built from. binlog_row_metadata=FULL (MariaDB 10.5+, MySQL 8.0.1+) puts column names
    in the log itself, so rows logged before an ALTER TABLE still decode by their own
    columns, not today's.
    """
    if variables.get("log_bin", "OFF").upper() not in ("ON", "1"):
        return (
            f"binary logging is off on {where}; set log_bin (with binlog_format=ROW, "
            f"binlog_row_image=FULL, binlog_row_metadata=FULL) {_RESTART}"
        )
    binlog_format = variables.get("binlog_format", "").upper()
    if binlog_format != "ROW":
        return (
            f"binlog_format is {binlog_format or 'unknown'} on {where}; set "
            f"binlog_format=ROW (and binlog_row_image=FULL) {_RESTART} (SET GLOBAL "
            "binlog_format=ROW applies to new connections at once)"
        )
    row_image = variables.get("binlog_row_image", "FULL").upper()
    if row_image != "FULL":
        return (
            f"binlog_row_image is {row_image} on {where}; set binlog_row_image=FULL "
            f"{_RESTART} (SET GLOBAL binlog_row_image=FULL applies to new connections)"
        )
    metadata = variables.get("binlog_row_metadata")
    if metadata is not None and metadata.upper() != "FULL":
        return (
            f"binlog_row_metadata is {metadata.upper()} on {where}; set "
            f"binlog_row_metadata=FULL {_RESTART} (SET GLOBAL binlog_row_metadata=FULL "
            "applies at once): the log must carry column names"
        )
    # Compressed events (MySQL's transaction payloads, MariaDB's compressed rows) are
    # not decoded by the reader: their rows would pass unseen.
    for name in ("binlog_transaction_compression", "log_bin_compress"):
        if variables.get(name, "OFF").upper() in ("ON", "1"):
            return (
                f"{name} is ON on {where}; set {name}=OFF {_RESTART} (SET GLOBAL "
                f"{name}=OFF applies at once): compressed binlog events are not decoded"
            )
    return None


def no_binlog_monitor(where: str, user: str) -> str:
    return (
        f"user {user!r} may not read the binlog status on {where}; GRANT REPLICATION "
        f"CLIENT ON *.* TO the user (MariaDB 10.5+ calls it BINLOG MONITOR)"
    )


def no_replication_slave(where: str, user: str) -> str:
    return (
        f"user {user!r} may not read the binlog on {where}; GRANT REPLICATION SLAVE "
        "ON *.* TO the user"
    )


def log_gone(where: str, position: str, reason: str) -> str:
    """The server no longer has the log after `position`: changes in between are lost."""
    return (
        f"{where} no longer has the binlog after {position} (purged or reset: {reason}); "
        "the changes since then were never seen, so cached rows may be stale: clear the "
        "mapped cache namespaces and start the follower without its checkpoint"
    )
