"""The follower: elect one per source, read the log, invalidate, then checkpoint.

At least once, never lost: a batch's keys are invalidated (one pipelined round trip)
before the checkpoint moves past them, the checkpoint only ever names a transaction
boundary, and the source may free its log only up to a checkpointed position. A follower
killed anywhere restarts from the checkpoint and replays at most the last batch; a
replayed delete is harmless.

One follower per source: a seawall.Lock elects it; its fence guards the checkpoint, so a
deposed follower (paused past its lease) can never move it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from seawall.cache._sync.base import REDIS_DOWN
from seawall.cache._sync.cache import Cache
from seawall.cdc._events import (
    Event,
    LogGap,
    RowChange,
    Source,
    SourceError,
    TableReset,
    TxEnd,
)
from seawall.cdc._invalidate import (
    invalidate,
    new_sender,
    read_checkpoint,
    read_checkpoint_server,
    write_checkpoint,
)
from seawall.cdc._keys import Unkeyable, key_text
from seawall.cdc._mapping import TableMap, parse_maps
from seawall.cdc._notices import Notices
from seawall.cdc._status import FollowerStatus
from seawall.errors import LockError
from seawall.locks._sync.lock import Lock
from seawall.metrics._families import FOLLOWER_CLEARS, FOLLOWER_EVENTS, FOLLOWER_LAG
from seawall.metrics._sink import SINK as metrics_sink

__all__ = ["Follower", "FollowerStatus"]

log = logging.getLogger("seawall.cdc")

_MAX_BACKOFF = 5.0
# How long one read waits for the log: also how quickly stop() and a lost election act.
_READ_WAIT = 0.25
# A stream that lasted this long was healthy: its loss is reconnected at once.
_STABLE = 5.0
# How often the checkpoint's copy under the source's address follows it (see _lead).
_ADDRESS_COPY_EVERY = 1.0


@dataclass(frozen=True, slots=True)
class _Target:
    namespace: str
    columns: tuple[str, ...]  # the mapped column, or the primary key's columns


# The metric's cause for a namespace cleared because a key value could not be keyed.
_UNKEYABLE = "an unkeyable key value"
_GAP = "a gap in the log"


class _Deposed(Exception):
    """Another follower holds the election now: stop reading, wait again."""


class Follower:
    """Follow `source` and invalidate the seawall.Cache entries of every changed row.

    `source` is a SOURCE_URL (postgresql://..., mysql://...) or a Source object; `redis`
    a redis-py client (give it a socket_timeout so a frozen Redis is retried, not waited
    on forever); `maps` are `TABLE=NAMESPACE[:COLUMN]` strings or TableMap objects.
    `ttl` is the election lock's: a standby takes over within it when the leader dies.

    `on_invalidated(entries)`, if given, is called with each batch's (namespace, key)
    pairs once their seawall.Cache entries are voided, before the checkpoint moves past
    them: the place to invalidate copies kept under other keys (seawall.django's
    `seawall_follow` deletes Django cache keys there). It must be idempotent: a batch
    is retried whole, the call included, when Redis did not answer (a redis-py error
    or an OSError raised by it counts as that); any other exception ends the follower.

    `on_cleared(namespaces)`, if given, is called the same way (idempotent, retried,
    before the checkpoint) with the namespaces cleared whole (a TRUNCATE, a statement-
    logged change, a replaced table, a key that keys nothing, a gap in the log): copies
    kept under other keys must be dropped whole then, as `on_invalidated` never names
    the rows. `on_gap` ("clear" or "stop"): what a gap in the log does (see LogGap).
    """

    def __init__(
        self,
        source: str | Source,
        redis: Any,
        maps: Sequence[str | TableMap],
        *,
        ttl: float = 10.0,
        status_interval: float = 10.0,
        on_status: Callable[[FollowerStatus], None] | None = None,
        on_invalidated: Callable[[list[tuple[str, str]]], None] | None = None,
        on_gap: Literal["clear", "stop"] = "clear",
        on_cleared: Callable[[list[str]], None] | None = None,
    ) -> None:
        if on_gap not in ("clear", "stop"):
            raise ValueError(f"on_gap must be 'clear' or 'stop', got {on_gap!r}")
        self.on_gap = on_gap
        if isinstance(source, str):
            from seawall.cdc._sources import open_source

            source = open_source(source)
        self.source: Source = source
        self._redis = redis
        schema = getattr(source, "default_schema", None)
        strings = [m for m in maps if isinstance(m, str)]
        parsed = parse_maps(strings, schema) if strings else []
        self.maps: list[TableMap] = [m for m in maps if isinstance(m, TableMap)] + parsed
        self._default_schema = schema or ""
        self.ttl = ttl
        self.status_interval = status_interval
        self._on_status = on_status
        self._on_invalidated = on_invalidated
        self._on_cleared = on_cleared
        self._sender = new_sender()
        self._generations: dict[str, int] = {}  # of the cache namespaces (see invalidate)
        self._stop = threading.Event()
        self._deposed = threading.Event()
        self._targets: dict[str, list[_Target]] = {}  # table -> its namespaces
        self._key = source.name  # the election's and the checkpoint's (see _prepare)
        # Whether the checkpoint is also copied under the source's name (its address), for
        # the next server behind that address (see _lead), and when it last was.
        self._address_copy = False
        self._copied = 0.0
        self._leader = False
        self._streaming = False
        self._position: str | None = None
        self._lag = 0.0
        self._pending_since: float | None = None  # commit time of the oldest change waiting
        self._changes = self._invalidated = 0
        self._window = (time.monotonic(), 0)  # (start, row changes at start)
        self._rate = 0.0
        self._notices = Notices()
        self._caches: dict[str, Cache] = {}  # namespaces cleared whole, by name
        self._elections = 0  # Lock objects made: the newest is the current election

    # -- public ---------------------------------------------------------------------------

    def run(self) -> None:
        """Follow until stop(): wait to be elected, lead, and wait again if deposed.

        Raises SourceError at once for a source that cannot be followed (unreachable,
        misconfigured, a missing table); later outages are retried.
        """
        self._prepare()
        # Only the process's first start checks the configuration (an unreachable server
        # or a bad setting ends it there); once it has stood by or led, every later open
        # is an outage to wait out.
        first_start = True
        lock = self._election()
        waiting_logged = False
        delay = 0.2
        while not self._stop.is_set():
            try:
                elected = lock.acquire(timeout=min(self.ttl, 1.0))
            except (*REDIS_DOWN, LockError) as exc:
                log.warning(
                    "seawall follow: could not take part in the election (%s); retrying in %.1f s",
                    exc,
                    delay,
                )
                self._report()
                self._stop.wait(delay)
                delay = min(delay * 2, _MAX_BACKOFF)
                lock = self._election()  # whatever that attempt left behind is forgotten
                continue
            delay = 0.2
            if not elected:
                first_start = False
                if not waiting_logged:
                    log.info(
                        "seawall follow: another follower leads %s; standing by", self.source.name
                    )
                    waiting_logged = True
                self._report()
                continue
            waiting_logged = False
            self._deposed.clear()
            try:
                self._lead(lock.fence, first_start)
            except _Deposed:
                if self._stop.is_set():
                    break
                log.warning(
                    "seawall follow: deposed as the follower of %s; standing by", self.source.name
                )
            finally:
                first_start = False
                self._leader = self._streaming = False
                self._pending_since = None  # re-read by whoever leads next
                self.source.close()
                with contextlib.suppress(Exception):  # the lease is lost either way
                    if lock.owned():
                        lock.release()
                # A hold that lapsed (paused past the lease, Redis frozen) stays recorded
                # in its Lock object, which would refuse the next acquire as "already
                # held": every election gets a Lock of its own.
                lock = self._election()

    def _election(self) -> Lock:
        """A fresh election lock; only the current one's lost lease deposes. (The
        callback names the election by number, not the Lock: a reference cycle would
        keep a forgotten Lock, and its lease renewal, alive until a garbage collection.)"""
        self._elections += 1
        number = self._elections

        def lost(_lock: Lock) -> None:
            if number == self._elections:
                self._deposed.set()

        return Lock(self._redis, f"cdc:{self._key}", ttl=self.ttl, on_lost=lost)

    def stop(self) -> None:
        """Ask run() to return after the batch in hand (callable from any thread)."""
        self._stop.set()

    def status(self) -> FollowerStatus:
        return FollowerStatus(
            source=self.source.name,
            leader=self._leader,
            streaming=self._streaming,
            # The position as a reader knows it (an LSN, a GTID): a source may keep more
            # after a space, for itself (PostgreSQL: the tables' OIDs).
            position=self._position.partition(" ")[0] if self._position else self._position,
            lag_seconds=self._current_lag(),
            events_per_second=self._rate,
            row_changes=self._changes,
            invalidated=self._invalidated,
        )

    # -- leading --------------------------------------------------------------------------

    def _prepare(self) -> None:
        columns: dict[str, list[str | None]] = {}
        for item in self.maps:
            table = item.qualified(self._default_schema)
            keys = tuple(self.source.key_columns(table))
            if item.column is None and not keys:
                raise SourceError(
                    f"table {table} has no primary key: name the column to key the cache "
                    f"by (--map {table}={item.namespace}:COLUMN)"
                )
            target = _Target(item.namespace, (item.column,) if item.column else keys)
            self._targets.setdefault(table, []).append(target)
            columns.setdefault(table, []).append(item.column)
        watch = getattr(self.source, "watch", None)
        if watch is not None:
            watch({t: c[0] if len(c) == 1 else tuple(c) for t, c in columns.items()})
        # Elect and checkpoint by the server's identity when the source knows it (every
        # spelling of one server's address is one source), else by its name.
        self._key = getattr(self.source, "election_name", None) or self.source.name
        if self._key != self.source.name:
            log.info("seawall follow: %s is %s", self.source.name, self._key)
        # A source whose identity is not shared by the replica that replaces it (MariaDB)
        # also keeps the checkpoint under its address: the followers of the server behind
        # that address after a failover resume from it.
        self._address_copy = self._key != self.source.name and hasattr(self.source, "portable")

    def _lead(self, fence: int, first_start: bool) -> None:
        position, fence_seen = self._redis_call(lambda: read_checkpoint(self._redis, self._key))
        gap: LogGap | None = None
        # (With an address copy, also after a leader that claimed its election's
        # checkpoint died before it had a position: the copy may name a gap.)
        if (
            not position
            and self._key != self.source.name
            and (not fence_seen or self._address_copy)
        ):
            position, gap = self._address_checkpoint()
        position = position or None
        # Claim the checkpoint with our fence at once: from now on a deposed follower's
        # writes are refused.
        self._checkpoint(position or "", fence, copy=True)
        self._leader = True
        self._position = position
        self._open(position, fence, first=first_start, gap=gap)
        self._streaming = True
        log.info(
            "seawall follow: streaming %s from %s",
            self.source.name,
            position or "the source's own position",
        )
        opened = time.monotonic()
        delay = 0.0
        while not self._stop.is_set():
            if self._deposed.is_set():
                raise _Deposed
            try:
                events = self.source.read(_READ_WAIT)
            except (SourceError, OSError) as exc:  # a lost connection: the contract's, or raw
                # A stream lost again soon after it was opened (a server that drops it at
                # the same event every time) is reopened with backoff, never in a loop.
                quick = time.monotonic() - opened < _STABLE
                delay = min(max(delay * 2, 0.2), _MAX_BACKOFF) if quick else 0.0
                log.warning(
                    "seawall follow: %s; reconnecting%s",
                    exc,
                    f" in {delay:.1f} s" if delay else "",
                )
                self._streaming = False
                if delay and self._stop.wait(delay):
                    raise _Deposed from None  # stopping
                self._open(self._position, fence, first=False)
                opened = time.monotonic()
                self._streaming = True
                log.info(
                    "seawall follow: streaming %s again from %s",
                    self.source.name,
                    self._position or "the source's own position",
                )
                continue
            if events:
                self._apply(events, fence)
            self._report()

    def _address_checkpoint(self) -> tuple[str | None, LogGap | None]:
        """The checkpoint kept under the source's address, for an election that has none
        of its own: written by a follower of the server that was behind this address
        before a failover (or by a version that kept it only there). A position of
        another server that is not valid on this one (a binlog file offset) is a gap."""
        position, _ = self._redis_call(lambda: read_checkpoint(self._redis, self.source.name))
        if not position:
            return None, None
        server = self._redis_call(lambda: read_checkpoint_server(self._redis, self.source.name))
        portable = getattr(self.source, "portable", None)
        if server is None or server == self._key or portable is None or portable(position):
            if server is not None and server != self._key:
                log.info(
                    "seawall follow: %s is a new server behind %s; resuming from the "
                    "checkpoint of %s",
                    self._key,
                    self.source.name,
                    server,
                )
            return position, None
        return None, LogGap(
            f"the checkpoint of {self.source.name} ({position}) was read from another server "
            f"({server}), and {self._key} has no such position"
        )

    def _open(
        self, position: str | None, fence: int, *, first: bool, gap: LogGap | None = None
    ) -> None:
        delay = 0.2
        known_gap, gap_found = gap, False
        while True:
            # Still the leader? A successor claims the checkpoint as soon as it is
            # elected, so our fence is refused then (and we raise _Deposed): a follower
            # paused past its lease must never take the stream back from its successor.
            if self._deposed.is_set():
                raise _Deposed
            self._checkpoint(self._position or "", fence)
            try:
                if known_gap is not None:
                    found, known_gap = known_gap, None
                    raise found
                started = self.source.open(None if gap_found else position)
            except LogGap as exc:
                if gap_found:
                    raise  # from the source's own position: cannot happen
                if self.on_gap == "stop":
                    raise SourceError(
                        f"{exc}; stopped (on_gap 'stop'): clear the mapped cache namespaces, "
                        "then start the follower without its checkpoint"
                    ) from None
                log.warning(
                    "seawall follow: %s; the changes in between were never seen, so the "
                    "mapped cache namespaces (%s) are cleared and the follower goes on from "
                    "the source's current position",
                    exc,
                    ", ".join(sorted(self._namespaces())),
                )
                gap_found = True
                continue
            except SourceError as exc:
                if first:
                    raise
                log.warning("seawall follow: %s; retrying in %.1f s", exc, delay)
                self._report()  # status lines go on while the source is away
            else:
                if gap_found:
                    # Cleared once the new start is fixed: a row cached before the clear
                    # is gone, a change after the start is streamed.
                    self._clear_all(_GAP)
                    self._checkpoint(started or "", fence, copy=True)
                    self._position = started
                    return
                if position is None and started:
                    # A source that starts "from now" (MariaDB): without this, a leader
                    # killed before its first transaction leaves no checkpoint and its
                    # successor's later "now" skips what was committed in between.
                    self._checkpoint(started, fence, copy=True)
                    self._position = started
                return
            if self._stop.wait(delay):
                raise _Deposed  # stopping: leave as if deposed, nothing to flush
            if self._deposed.is_set():
                raise _Deposed
            delay = min(delay * 2, _MAX_BACKOFF)

    def _apply(self, events: Sequence[Event], fence: int) -> None:
        if self._pending_since is None:
            # Its changes were committed by the first transaction end it holds (or, in
            # the middle of a transaction, by now at the latest).
            ends = (e.committed_at for e in events if isinstance(e, TxEnd) and e.committed_at)
            self._pending_since = next(ends, None) or time.time()
        keys: list[tuple[str, str]] = []
        cleared: dict[str, str] = {}  # namespace -> cause
        last: TxEnd | None = None
        changes = 0
        for event in events:
            if isinstance(event, TxEnd):
                last = event
            elif isinstance(event, TableReset):
                targets = self._targets.get(event.table, [])
                for target in targets:
                    cleared[target.namespace] = event.cause
                if targets:
                    names = ", ".join(repr(t.namespace) for t in targets)
                    self._warn(
                        f"reset:{event.table}:{event.cause}",
                        f"{event.table}: {event.cause}, not in the log row by row; "
                        f"cleared the cache namespace {names} whole",
                    )
            else:
                changes += 1
                keys += self._keys_of(event, cleared)
        labels = (self.source.name,)
        if cleared:
            self._redis_call(lambda: self._clear(cleared))
            for cause in cleared.values():
                metrics_sink.count(FOLLOWER_CLEARS.name, (self.source.name, cause), 1)
        if keys:
            self._invalidated += self._redis_call(lambda: self._invalidate(keys))
        self._changes += changes
        if changes:
            metrics_sink.count(FOLLOWER_EVENTS.name, labels, changes)
        if last is None:
            return
        self._checkpoint(last.position, fence)
        self._position = last.position
        # Whatever follows the last transaction end (a transaction cut by the batch) waits.
        self._pending_since = None if isinstance(events[-1], TxEnd) else time.time()
        if last.committed_at is not None:
            self._lag = max(0.0, time.time() - last.committed_at)
        metrics_sink.gauge(FOLLOWER_LAG.name, labels, self._current_lag())
        try:
            self.source.confirm(last.position)
        except SourceError as exc:
            log.warning("seawall follow: %s (the position is checkpointed; confirmed later)", exc)

    def _invalidate(self, keys: list[tuple[str, str]]) -> int:
        done = invalidate(self._redis, keys, self._sender, self._generations)
        if self._on_invalidated is not None:
            self._on_invalidated(list(dict.fromkeys(keys)))
        return done

    def _clear_all(self, cause: str) -> None:
        cleared = dict.fromkeys(self._namespaces(), cause)
        self._redis_call(lambda: self._clear(cleared))
        metrics_sink.count(FOLLOWER_CLEARS.name, (self.source.name, cause), len(cleared))

    def _namespaces(self) -> set[str]:
        return {target.namespace for targets in self._targets.values() for target in targets}

    def _clear(self, namespaces: dict[str, str]) -> None:
        """Clear each namespace whole (Cache.clear(): O(1), in Redis and every L1)."""
        for namespace in namespaces:
            cache = self._caches.get(namespace)
            if cache is None:
                cache = self._caches[namespace] = Cache(self._redis, namespace)
            cache.clear()
        if self._on_cleared is not None:
            self._on_cleared(list(namespaces))

    def _warn(self, cause: str, text: str) -> None:
        line = self._notices.notice(cause, text)
        if line is not None:
            log.warning("seawall follow: %s", line)

    def _keys_of(self, change: RowChange, cleared: dict[str, str]) -> list[tuple[str, str]]:
        """The (namespace, key) pairs a change voids; a namespace whose key cannot be
        named (a value no cache key is made of) goes into `cleared` instead."""
        keys: list[tuple[str, str]] = []
        for target in self._targets.get(change.table, ()):
            try:
                found = [self._text(change.row, target, change.table)]
                if change.op == "update" and change.old is not None:
                    found.append(self._text(change.old, target, change.table))
            except Unkeyable as exc:
                cleared[target.namespace] = _UNKEYABLE
                self._warn(
                    f"unkeyable:{change.table}:{target.namespace}",
                    f"a change of {change.table} has a key that no cache key is made of "
                    f"({exc}): cleared the cache namespace {target.namespace!r} whole",
                )
                continue
            keys += [(target.namespace, k) for k in dict.fromkeys(found) if k is not None]
        return keys

    def _text(self, row: Any, target: _Target, table: str) -> str | None:
        values = [row.get(c) for c in target.columns]
        if any(v is None for v in values):
            self._warn(
                f"null:{table}",
                f"a change of {table} does not carry {', '.join(target.columns)} (NULL, "
                "or not logged); no cache entry is keyed by it, so none is invalidated",
            )
            return None
        # The key as Cache makes it: cache.get_or_load(42) and a row's 42 are one entry
        # (other types: see _keys). A composite key's values are joined by ":" in key
        # order.
        return ":".join(key_text(v, target.namespace) for v in values)

    def _checkpoint(self, position: str, fence: int, *, copy: bool = False) -> None:
        accepted = self._redis_call(
            lambda: write_checkpoint(self._redis, self._key, position, fence)
        )
        if not accepted:
            raise _Deposed
        if not self._address_copy or not position:
            return
        now = time.monotonic()
        if copy or now - self._copied >= _ADDRESS_COPY_EVERY:
            # Refused only when a follower of a later election wrote it (fences grow
            # with the clock across lock names): never a reason to stand down here.
            self._redis_call(
                lambda: write_checkpoint(
                    self._redis, self.source.name, position, fence, server=self._key
                )
            )
            self._copied = now

    def _redis_call(self, call: Callable[[], Any]) -> Any:
        """`call()` until Redis answers: nothing moves on past a step Redis did not take."""
        delay = 0.1
        while True:
            try:
                return call()
            except REDIS_DOWN as exc:
                log.warning(
                    "seawall follow: Redis did not answer (%s); retrying in %.1f s", exc, delay
                )
            self._report()  # the lag grows while Redis is away: say so every interval
            if self._stop.wait(delay) or self._deposed.is_set():
                raise _Deposed
            delay = min(delay * 2, _MAX_BACKOFF)

    def _current_lag(self) -> float:
        if self._pending_since is not None:
            return max(self._lag, time.time() - self._pending_since)
        return self._lag

    def _report(self) -> None:
        now = time.monotonic()
        start, changes = self._window
        if now - start < self.status_interval:
            return
        self._rate = (self._changes - changes) / (now - start)
        if self._changes == changes:
            self._lag = 0.0  # idle: nothing waits to be invalidated
        self._window = (now, self._changes)
        status = self.status()
        if status.leader:
            metrics_sink.gauge(FOLLOWER_LAG.name, (self.source.name,), status.lag_seconds)
        if status.leader:
            log.info(
                "seawall follow: %s at %s, lag %.3f s, %.0f row changes/s",
                status.source,
                status.position or "the source's own position (nothing checkpointed yet)",
                status.lag_seconds,
                status.events_per_second,
            )
        if self._on_status is not None:
            self._on_status(status)
