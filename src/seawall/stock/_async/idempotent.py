"""Idempotent: run a message's handler at most once per message id, across processes.

Brokers deliver at least once: a consumer that dies before its ack, a rebalance, or two
instances bound to one queue all mean the same message arrives again. `run(message_id,
handler)` claims the id under a lease, runs the handler, records its outcome (JSON), and
every later or concurrent delivery of that id returns the recorded outcome instead of
running the handler again. A concurrent duplicate waits for the claimant, woken (BLPOP on
the message's wake-up list) the moment the outcome is recorded or the claim is given up,
and bounded by `timeout`.

What "once" means, precisely (see docs/orders.md):
- The handler has run to completion at most once per id, unless a claimant stalls past its
  lease while alive (a stop-the-world pause longer than `lease`, a frozen host): its lease
  is renewed while the process runs, so only a stalled or cut-off process loses it, and
  then another delivery runs the handler too. Redis losing the record (a restart without
  appendfsync always, a failover to a lagging replica) has the same effect.
- If the handler raises, nothing is recorded: the next delivery runs it again.
- If it returns a value JSON cannot encode, its run is recorded as done all the same (the
  handler is never run twice for that): its caller gets the value, later deliveries
  IdempotentOutcomeError.
- If the claimant dies mid-handler, the handler's effects so far stay and another delivery
  runs it again after the lease: effects outside a transaction may happen twice.
Exactly once for a database write needs the write and the dedupe mark in one transaction:
`seawall.claim_message` (in the same SQL transaction as the handler's write).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from seawall.errors import IdempotencyTimeout, IdempotentOutcomeError
from seawall.locks import _lease
from seawall.locks._async.renewer import get_renewer
from seawall.shared import _concurrency, _scripts, _tokens
from seawall.shared._async.scripts import run_script
from seawall.shared._bounded import async_execute, async_time_limit, async_until, last_look
from seawall.shared._concurrency import (
    async_check_handler,
    async_giving_back,
    async_in_own_task,
    async_resolve,
    async_spawn,
    async_stop_if_cancelled,
)
from seawall.shared._keys import tagged
from seawall.shared._validate import check_async_client, check_name, check_seconds, check_timeout

_CLAIM = _scripts.load("seawall.stock", "idempotent_claim")
_FINISH = _scripts.load("seawall.stock", "idempotent_finish")
_EXTEND = _scripts.load("seawall.stock", "idempotent_extend")

# A BLPOP must end before the client's socket timeout would cut it off.
_SOCKET_MARGIN = 0.8

# Recorded instead of an outcome JSON cannot encode; never valid JSON, so never an outcome.
_UNRECORDED = "!unrecorded:"


class _Claim:
    """One running claim, as the renewer holds it."""

    __slots__ = ("key", "message_id", "token")

    def __init__(self, key: str, token: str, message_id: str) -> None:
        self.key = key
        self.token = token
        self.message_id = message_id


class AsyncIdempotent:
    """At most one run of a handler per message id in `namespace`, outcomes kept `ttl` s.

    `ttl` must outlast every redelivery of a message (the broker's retry horizon).
    `lease`: how long a claim survives its claimant without renewal (renewed every
    lease/3 while the handler runs). `timeout`: how long a duplicate waits for a running
    claimant before raising `IdempotencyTimeout` (None: as long as it takes).
    """

    def __init__(
        self,
        client: Any,
        namespace: str,
        *,
        ttl: float = 86_400.0,
        lease: float = 30.0,
        timeout: float | None = 60.0,
    ) -> None:
        self._client = check_async_client(client, "Idempotent")
        self.namespace = check_name(namespace, "Idempotent namespace")
        self.ttl = check_seconds(ttl, "Idempotent ttl")
        self.lease = check_seconds(lease, "Idempotent lease", minimum=0.01)
        self.timeout = check_timeout(timeout, "Idempotent timeout")
        socket_timeout = _socket_timeout(self._client)
        self._max_block = (
            _lease.MAX_WAIT_SLICE
            if not socket_timeout
            else min(_lease.MAX_WAIT_SLICE, float(socket_timeout) * _SOCKET_MARGIN)
        )

    def __repr__(self) -> str:
        return f"Idempotent(namespace={self.namespace!r}, ttl={self.ttl}, lease={self.lease})"

    def key(self, message_id: str) -> str:
        """The record of `message_id` (its wake-up list is this plus ":wake")."""
        return tagged("idempotent", f"{self.namespace}:{message_id}")

    async def run(
        self, message_id: str | int, handler: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        """`handler(*args, **kwargs)`'s outcome: run now, or recorded by an earlier run.

        The outcome is recorded as JSON (returned decoded to duplicates, so a tuple comes
        back as a list). One JSON cannot encode still counts as a run: this caller gets it,
        later deliveries raise IdempotentOutcomeError (the message is handled). A handler
        that raises records nothing and the exception propagates: the next delivery runs
        it again.
        """
        if isinstance(message_id, int) and not isinstance(message_id, bool):
            message_id = str(message_id)
        message_id = check_name(message_id, "Idempotent message id")
        async_check_handler(handler, f"Idempotent {self.namespace!r}")
        key = self.key(message_id)
        token = _tokens.token_hex()
        deadline = None if self.timeout is None else _concurrency.monotonic() + self.timeout
        lease_ms = max(int(self.lease * 1000), 1)
        while True:
            sent = _concurrency.monotonic()
            bound = last_look(deadline)
            try:
                async with async_until(bound):
                    reply = await async_giving_back(
                        run_script(self._client, _CLAIM, (key,), (token, lease_ms)),
                        functools.partial(self._abandon_within, _Claim(key, token, message_id)),
                        "abandoning an Idempotent claim",
                    )
            except TimeoutError as exc:
                if bound is None or _concurrency.monotonic() < bound:
                    raise
                # The claim may yet be granted (a frozen server runs it when it thaws):
                # abandon it then, so the next delivery need not wait out the lease.
                async_spawn(
                    functools.partial(self._abandon_within, _Claim(key, token, message_id)),
                    f"abandoning the claim on {key!r}",
                )
                raise self._timed_out(message_id) from exc
            state = _scripts.reply_text(reply[0])
            if state == "done":
                return self._outcome(message_id, _scripts.reply_text(reply[1]))
            if state == "claimed":
                claim = _Claim(key, token, message_id)
                return await self._run_claimed(claim, sent, handler, args, kwargs)
            remaining = None if deadline is None else deadline - _concurrency.monotonic()
            if remaining is not None and remaining <= 0:
                raise self._timed_out(message_id)
            wait = min(_lease.wait_slice(int(reply[1]), remaining), self._max_block)
            # redis-py's asyncio client may swallow a cancellation that lands while it reads
            # a reply: a cancelled duplicate stops here instead of waiting until `timeout`.
            async_stop_if_cancelled()
            if wait > 0.001:
                wake = f"{key}:wake"
                bound = last_look(deadline)
                try:
                    async with async_until(bound):
                        # Its own task: a cancel the blocked read swallowed would hold
                        # this caller for the whole slice.
                        await async_in_own_task(
                            functools.partial(
                                async_execute, self._client, ("BLPOP", wake, wait), wake
                            )
                        )
                except TimeoutError:
                    if bound is None or _concurrency.monotonic() < bound:
                        raise
                    raise self._timed_out(message_id) from None

    def _timed_out(self, message_id: str) -> IdempotencyTimeout:
        return IdempotencyTimeout(
            f"message {message_id!r} of {self.namespace!r} is still being handled "
            f"by another process after {self.timeout} s (or Redis did not answer in that "
            "time); requeue it (its outcome will be returned once recorded) or raise the "
            "timeout",
            message_id=message_id,
        )

    async def _abandon_within(self, claim: _Claim) -> None:
        async with async_time_limit(self.lease):
            await self._finish(claim, "abandon", "")

    async def recorded(self, message_id: str) -> tuple[bool, Any]:
        """(True, outcome) if `message_id` was handled (within ttl), else (False, None)."""
        return await self._recorded_at(message_id)

    async def _recorded_at(self, message_id: str) -> tuple[bool, Any]:
        state, outcome = await self._client.hmget(self.key(message_id), ["state", "outcome"])
        if state is None or _scripts.reply_text(state) != "done":
            return False, None
        return True, self._outcome(message_id, _scripts.reply_text(outcome))

    def _outcome(self, message_id: str, text: str) -> Any:
        if not text.startswith(_UNRECORDED):
            return json.loads(text)
        raise IdempotentOutcomeError(
            f"message {message_id!r} of {self.namespace!r} was handled, but its outcome "
            f"({text.removeprefix(_UNRECORDED)}) was not JSON and could not be recorded: "
            "the handler is not run again; ack the message. Return plain JSON types from the "
            "handler to have its outcome recorded",
            message_id=message_id,
        )

    async def forget(self, message_id: str) -> None:
        """Drop the record of `message_id`: its next delivery runs the handler again."""
        key = self.key(message_id)
        await self._client.delete(key)

    async def _run_claimed(
        self,
        claim: _Claim,
        sent: float,
        handler: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        renewer = get_renewer()
        renewer.add(self, claim, _lease.renew_at(sent, self.lease))
        try:
            async_stop_if_cancelled()  # the claim's reply may have swallowed it: abandon
            outcome = await async_resolve(handler(*args, **kwargs))
        except BaseException:
            renewer.discard(claim)
            await self._finish(claim, "abandon", "")
            raise
        renewer.discard(claim)
        # The handler ran: that is recorded whatever it returned, or a redelivery would
        # run it again (charge the card again) only because its result is not JSON.
        try:
            encoded = json.dumps(outcome)
        except (TypeError, ValueError) as exc:
            encoded = f"{_UNRECORDED}{type(outcome).__qualname__}, {exc}"
            _concurrency.log.warning(
                "Idempotent %r: the outcome of %s is not JSON (%s); the run is "
                "recorded as done without it, later deliveries get IdempotentOutcomeError",
                self.namespace,
                claim.key,
                exc,
            )
        if await self._finish(claim, "done", encoded):
            return outcome
        # Our lease ran out and another claimant recorded first: its outcome stands.
        try:
            found, recorded = await self._recorded_at(claim.message_id)
        except IdempotentOutcomeError:
            return outcome
        return recorded if found else outcome

    async def _finish(self, claim: _Claim, how: str, encoded: str) -> bool:
        ttl_ms = max(int(self.ttl * 1000), 1)
        done = await run_script(
            self._client,
            _FINISH,
            (claim.key, f"{claim.key}:wake"),
            (claim.token, how, encoded, ttl_ms),
        )
        return bool(done)

    async def _renew(self, hold: object) -> float | None:
        assert isinstance(hold, _Claim)
        sent = _concurrency.monotonic()
        try:
            # Bounded by the lease: a frozen server must not hold up this renewal forever.
            async with async_time_limit(self.lease):
                renewed = await run_script(
                    self._client,
                    _EXTEND,
                    (hold.key,),
                    (hold.token, max(int(self.lease * 1000), 1)),
                )
        except Exception as exc:  # a blip: try again soon, the lease still runs
            _concurrency.log.warning("renewing %s failed: %r", hold.key, exc)
            return _lease.retry_at(sent, self.lease, sent + self.lease)
        return _lease.renew_at(sent, self.lease) if renewed else None


def _socket_timeout(client: Any) -> float | None:
    """The client's socket timeout, if it has one (a cluster client keeps it per node)."""
    kwargs = getattr(client, "get_connection_kwargs", None)
    if kwargs is None:
        node_kwargs = getattr(client, "connection_kwargs", None) or {}
        return node_kwargs.get("socket_timeout")
    value = kwargs().get("socket_timeout")
    return float(value) if value else None
