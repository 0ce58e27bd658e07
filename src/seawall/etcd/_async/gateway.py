"""etcd's gRPC-JSON gateway (`/v3/...`, JSON over HTTP) through httpx: the thin I/O of
seawall.etcd. Every call takes a deadline (monotonic seconds, None for no bound) and
raises TimeoutError when etcd did not answer by then, whatever it was doing.

The gateway's paths are the same from etcd 3.4 (Debian bookworm ships 3.4.23) on:
/v3/kv/txn, /v3/kv/range, /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke and
/v3/watch. A keepalive is one request with one message in its body: the gateway answers
that message and ends the stream when the body ends. A watch is a POST whose response
streams one JSON message per line until the client closes it.
"""

from __future__ import annotations

import json
import threading
import weakref
from typing import Any

import httpx

from seawall.etcd._core import LOOK, NOT_FOUND, SILENT, EtcdError, b64, watch_outcome
from seawall.shared import _concurrency
from seawall.shared._bounded import last_look
from seawall.shared._concurrency import async_scope

# A request with no deadline of its own (a release, a keepalive with a far lease) still
# gives up after this long: a frozen etcd must not hang its caller for ever.
DEFAULT_TIMEOUT = 30.0

# gRPC status codes of a request etcd could not serve now but may serve once it is back:
# CANCELLED (the gateway's connection to etcd closing), UNAVAILABLE (no leader, timed out).
RETRYABLE = (1, 14)


def _timeout(deadline: float | None) -> httpx.Timeout:
    bound = last_look(deadline)
    seconds = DEFAULT_TIMEOUT if bound is None else bound - _concurrency.monotonic()
    return httpx.Timeout(max(seconds, 0.001))


class AsyncGateway:
    """One endpoint's gateway, with the connection pool of one event loop (or process)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint.rstrip("/")
        # Every waiting caller holds a connection for its watch: no cap on connections
        # (httpx's default of 100 would stall the 101st waiter), a pool of idle ones.
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=20)
        self._http = httpx.AsyncClient(base_url=self.endpoint, limits=limits)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def call(self, path: str, body: dict[str, Any], deadline: float | None) -> Any:
        """POST `body` to `path`; the decoded reply. EtcdError when etcd refused it."""
        try:
            reply = await self._http.post(path, json=body, timeout=_timeout(deadline))
        except httpx.TimeoutException as exc:
            raise TimeoutError(f"etcd at {self.endpoint} did not answer {path} in time") from exc
        except httpx.TransportError as exc:
            raise ConnectionError(f"etcd at {self.endpoint} is unreachable: {exc!r}") from exc
        decoded = reply.json()
        if decoded.get("code") in RETRYABLE or reply.status_code == 503:
            # The gateway is up but etcd behind it is not (restarting, no leader yet).
            raise ConnectionError(
                f"etcd at {self.endpoint} is unavailable: {decoded.get('message', decoded)}"
            )
        if "error" in decoded or reply.status_code != 200:
            raise EtcdError(
                f"etcd at {self.endpoint} refused {path}: {decoded.get('message', decoded)}",
                code=int(decoded.get("code", 0)),
            )
        if "result" in decoded:  # a streamed call's single answer
            decoded = decoded["result"]
        return decoded

    async def grant(self, lease: int, seconds: int, deadline: float | None) -> int:
        """Grant lease `lease` for `seconds`; the ttl etcd granted (it may raise it)."""
        reply = await self.call("/v3/lease/grant", {"ID": str(lease), "TTL": seconds}, deadline)
        return int(reply.get("TTL", seconds))

    async def keepalive(self, lease: int, deadline: float | None) -> int:
        """Renew `lease` to its full ttl; the ttl left, 0 when the lease is gone."""
        reply = await self.call("/v3/lease/keepalive", {"ID": str(lease)}, deadline)
        return int(reply.get("TTL", 0))

    async def revoke(self, lease: int, deadline: float | None) -> bool:
        """Revoke `lease`, deleting its keys; False when it was gone already."""
        try:
            await self.call("/v3/lease/revoke", {"ID": str(lease)}, deadline)
        except EtcdError as exc:
            if exc.code == NOT_FOUND:
                return False
            raise
        return True

    async def watch_delete(
        self, key: str, start_revision: int, wait: float, look_early: bool = False
    ) -> int:
        """Wait up to `wait` seconds for `key` to be deleted at or after `start_revision`:
        `_core.DELETED`, `_core.SILENT` (nothing in time) or `_core.LOOK` (look again)."""
        body = {"create_request": {"key": b64(key), "start_revision": str(start_revision)}}
        try:
            async with self._http.stream(
                "POST", "/v3/watch", json=body, timeout=httpx.Timeout(max(wait, 0.001))
            ) as reply:
                async for line in reply.aiter_lines():
                    if not line.strip():
                        continue
                    outcome = watch_outcome(json.loads(line), start_revision, look_early)
                    if outcome is not None:
                        return outcome
        except httpx.TimeoutException:
            return SILENT
        except httpx.TransportError as exc:
            raise ConnectionError(f"etcd at {self.endpoint} is unreachable: {exc!r}") from exc
        return LOOK  # the stream ended


# One gateway (one connection pool) per endpoint per event loop, or per process in sync
# code: making an httpx client costs about 20 ms (its TLS context), too much for a lock
# made per request, and a pool shared by every lock of the process reuses connections.
_gateways: weakref.WeakKeyDictionary[object, dict[str, AsyncGateway]] = weakref.WeakKeyDictionary()
_gateways_mutex = threading.Lock()


def get_gateway(endpoint: str) -> AsyncGateway:
    """The shared gateway to `endpoint` of the running event loop (sync: this process)."""
    here = async_scope()
    with _gateways_mutex:
        per_scope = _gateways.setdefault(here, {})
        gateway = per_scope.get(endpoint)
        if gateway is None:
            gateway = per_scope[endpoint] = AsyncGateway(endpoint)
        return gateway
