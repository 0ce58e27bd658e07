"""The binlog stream on a thread of its own, so `read(timeout)` can return empty-handed.

The replication connection blocks in a socket read until the server sends an event or
a heartbeat; a socket timeout short enough for `read(timeout)` would tear the
connection down (PyMySQL closes it on any timeout). So one thread reads the stream,
blocking, and hands decoded events to the caller through a bounded queue; the bound
holds the reader back when the follower is slower than the log.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pymysql
from pymysql.connections import Connection, MysqlPacket
from pymysqlreplication import BinLogStreamReader

from seawall.cdc._events import Event
from seawall.cdc._mariadb_config import FilePosition, GtidPosition, Position
from seawall.cdc._mariadb_events import EVENT_TYPES, TransactionTracker

__all__ = ["BinlogReader", "StreamLost", "connect"]

_LOST_CONNECTION = (2006, 2013)
_QUEUE_BATCHES = 1024
_MAX_READ = 5000
_JOIN_TIMEOUT = 5.0


class StreamLost(Exception):
    """The replication connection broke (server restart, network, read timeout), or the
    server ended it; `code` is the server's error code when it sent one."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class _Connection(Connection):  # type: ignore[misc]  # PyMySQL is untyped
    """A PyMySQL connection whose lost-connection errors are not OperationalError.

    The stream reader catches OperationalError 2006/2013 and quietly reconnects from the
    position it was created with, replaying or (with a file position mid-transaction)
    mis-decoding events; a distinct exception type goes past that handler to us.
    """

    def _read_packet(self, packet_type: Any = MysqlPacket) -> Any:
        try:
            return super()._read_packet(packet_type)
        except pymysql.OperationalError as exc:
            if exc.args and exc.args[0] in _LOST_CONNECTION:
                reason = exc.args[1] if len(exc.args) > 1 else exc
                raise StreamLost(" ".join(str(reason).split())) from exc
            raise


def connect(**settings: Any) -> Any:
    """The stream's connection factory (``pymysql_wrapper``)."""
    # The library still passes the old "db" name, which PyMySQL warns about.
    if "db" in settings:
        settings["database"] = settings.pop("db")
    return _Connection(**settings)


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class BinlogReader:
    """Reads one binlog stream from `start` on a daemon thread; `read` drains it."""

    def __init__(
        self,
        settings: dict[str, Any],
        start: Position,
        *,
        server_id: int,
        database: str,
        heartbeat: float,
        tables: Sequence[str] | None = None,
        uuids: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        self._tracker = TransactionTracker(start, database, tables, uuids)
        options: dict[str, Any] = {
            "connection_settings": settings,
            "server_id": server_id,
            "blocking": True,
            "only_events": EVENT_TYPES,
            "only_schemas": [database],
            # None decodes every table's rows; a list skips the others' unparsed.
            "only_tables": list(tables) if tables else None,
            "slave_heartbeat": heartbeat,
            "pymysql_wrapper": connect,
            "enable_logging": False,
        }
        if isinstance(start, GtidPosition):
            options.update(is_mariadb=True, auto_position=start.state)
        else:
            assert isinstance(start, FilePosition)
            # A MariaDB server still sends its GTID events to a file-position replica,
            # which is how the tracker tells DDL groups from transactions there.
            options.update(log_file=start.file, log_pos=start.offset, resume_stream=True)
        self._stream = BinLogStreamReader(**options)
        self._queue: queue.Queue[list[Event] | _Failure] = queue.Queue(_QUEUE_BATCHES)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    def start(self) -> None:
        """Connect and ask for the log; errors (privileges, a purged position) raise here.

        The server answers the dump request with a rotate event or an error, so the
        first event is read on the caller's thread: open() fails at once, not on a
        later read.
        """
        self._handle(self._stream.fetchone())
        self._thread = threading.Thread(target=self._run, name="seawall-binlog", daemon=True)
        self._thread.start()

    def read(self, timeout: float) -> Sequence[Event]:
        if self._failure is not None:
            raise self._failure
        try:
            item = self._queue.get(timeout=max(0.0, timeout))
        except queue.Empty:
            return []
        events: list[Event] = []
        while True:
            if isinstance(item, _Failure):
                # Events that arrived before the failure go out first; it raises next.
                self._failure = item.error
                if events:
                    return events
                raise item.error
            events.extend(item)
            if len(events) >= _MAX_READ:
                return events
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return events

    def close(self) -> None:
        self._stopping.set()
        connection = getattr(self._stream, "_stream_connection", None)
        sock = getattr(connection, "_sock", None)
        if sock is not None:
            # Wakes the reader thread out of its blocking recv.
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(_JOIN_TIMEOUT)
        with contextlib.suppress(Exception):
            self._stream.close()

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                event = self._stream.fetchone()
                if event is None:
                    raise StreamLost("the server ended the replication stream")
                self._handle(event)
        except BaseException as exc:  # handed to the reading thread
            if not self._stopping.is_set():
                if not isinstance(exc, StreamLost):
                    code = exc.args[0] if isinstance(exc, pymysql.Error) and exc.args else None
                    text = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
                    exc = StreamLost(text, code if isinstance(code, int) else None)
                self._put(_Failure(exc))

    def _handle(self, event: Any) -> None:
        out = self._tracker.feed(event, self._stream.log_file, self._stream.log_pos)
        if out is None:
            return
        batch: list[Event] = [*out] if isinstance(out, list) else [out]
        self._put(batch)

    def _put(self, item: list[Event] | _Failure) -> None:
        while not self._stopping.is_set():
            try:
                self._queue.put(item, timeout=0.2)
                return
            except queue.Full:
                continue
