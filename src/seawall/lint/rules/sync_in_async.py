"""SW011: a synchronous redis client called inside `async def`."""

from __future__ import annotations

import ast
import enum
from collections.abc import Iterator

from seawall.lint._annotations import CLIENT_CLASSES
from seawall.lint._bindings import PACKAGES, Kind
from seawall.lint._context import FileContext, RedisCall
from seawall.lint._model import rule
from seawall.lint._names import Inference

# Methods that send nothing when called: they build an object used later.
_NO_IO = frozenset(
    {
        "pipeline",
        "lock",
        "register_script",
        "pubsub",
        "monitor",
        "get_encoder",
        "get_connection_kwargs",
        "set_response_callback",
        # Accessors of the modules' command groups: they return an object, send nothing
        # (`await conn.ft("idx").info()` sends from the object, awaited).
        "ft",
        "json",
        "ts",
        "bf",
        "cf",
        "cms",
        "topk",
        "tdigest",
        "graph",
    }
)


class Flavour(enum.Enum):
    SYNC = "sync"
    ASYNC = "async"
    UNKNOWN = "unknown"


def _of_qualname(qualname: str | None) -> Flavour:
    if qualname is None:
        return Flavour.UNKNOWN
    parts = qualname.split(".")
    if parts[0] not in PACKAGES:
        return Flavour.UNKNOWN
    if "asyncio" in parts or parts[0] == "aioredis":
        return Flavour.ASYNC
    return Flavour.SYNC


def _of_annotation(inference: Inference, annotation: ast.expr) -> Flavour:
    found = set()
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name | ast.Attribute):
            qualified = inference.qualname(node)
            if qualified is not None and qualified.split(".")[-1] in CLIENT_CLASSES:
                found.add(_of_qualname(qualified))
    return found.pop() if len(found) == 1 else Flavour.UNKNOWN


def flavour(inference: Inference, expr: ast.expr, depth: int = 0) -> Flavour:
    """Whether the client `expr` is known to be a sync one (built by `redis.Redis(...)`,
    annotated `redis.Redis`) or an asyncio one; UNKNOWN when the file does not say, or
    says both."""
    if depth > 3:
        return Flavour.UNKNOWN
    if isinstance(expr, ast.Call):
        if inference.constructor(expr) is None:
            return Flavour.UNKNOWN
        func = expr.func
        base = func.value if isinstance(func, ast.Attribute) and func.attr == "from_url" else func
        return _of_qualname(inference.qualname(base))
    seen = set()
    for binding in inference.bindings_of(expr):
        if binding.annotation is not None:
            seen.add(_of_annotation(inference, binding.annotation))
        if binding.value is not None:
            seen.add(flavour(inference, binding.value, depth + 1))
    seen.discard(Flavour.UNKNOWN)
    return seen.pop() if len(seen) == 1 else Flavour.UNKNOWN


def _awaited(ctx: FileContext, call: RedisCall) -> bool:
    return isinstance(ctx.parents.get(call.node), ast.Await)


@rule("SW011", "sync-client-in-async")
def check(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """An `async def` runs on an event loop that serves every task of the process from
    one thread. A command sent with a synchronous client (`redis.Redis`) blocks that
    thread for its whole round trip: every other request of the server waits, and on a
    frozen server or a lost network without socket_timeout they wait for ever. The same
    model on the server side is in seed 004: one thread multiplexing many connections is
    fast only while nothing in it blocks.

    Fix: use `redis.asyncio.Redis` (or `redis.asyncio.from_url`) in async code and await
    each command; a sync library that cannot change can run in a thread with
    `await asyncio.to_thread(r.get, key)`. Reported at a command on a client the file
    builds with a sync constructor or annotates with a sync client class, called and not
    awaited directly inside an `async def` (not in a nested sync function or lambda).
    Known false positives: a short call at start-up, before the loop serves anything.
    """
    flavours: dict[ast.expr, Flavour] = {}
    for call in ctx.calls:
        if call.receiver is not Kind.CLIENT or call.command in _NO_IO or _awaited(ctx, call):
            continue
        if not isinstance(ctx.scope_of(call.node), ast.AsyncFunctionDef):
            continue
        if not isinstance(call.node.func, ast.Attribute):
            continue
        receiver = call.node.func.value
        if receiver not in flavours:
            flavours[receiver] = flavour(ctx.inference, receiver)
        if flavours[receiver] is not Flavour.SYNC:
            continue
        yield (
            call.node,
            (
                f"{call.name} on a sync redis client inside async def blocks the event loop "
                "for the round trip (every other task waits); use redis.asyncio.Redis and "
                "await it, or run it in a thread with asyncio.to_thread"
            ),
        )
