"""SW008: a client or connection pool built without socket_timeout."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from seawall.lint._context import FileContext, RedisCall
from seawall.lint._model import rule
from seawall.lint._names import Constructor


def _url_sets_timeout(call: ast.Call) -> bool:
    """`from_url("redis://h?socket_timeout=1")`: the URL's query carries the option."""
    for argument in [*call.args, *(k.value for k in call.keywords if k.arg == "url")]:
        for node in ast.walk(argument):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and "socket_timeout=" in node.value
            ):
                return True
    return False


# Blocking commands: where their block time is (positional index, keyword) and its unit.
_BLOCKING = {
    "blpop": (1, "timeout", 1.0),
    "brpop": (1, "timeout", 1.0),
    "bzpopmin": (1, "timeout", 1.0),
    "bzpopmax": (1, "timeout", 1.0),
    "brpoplpush": (2, "timeout", 1.0),
    "blmove": (2, "timeout", 1.0),
    "blmpop": (0, "timeout", 1.0),
    "bzmpop": (0, "timeout", 1.0),
    "xread": (2, "block", 0.001),
    "xreadgroup": (4, "block", 0.001),
}


def _block_time(call: RedisCall) -> tuple[float | None, bool]:
    """(seconds the command may block, or None if not a literal; whether it blocks at
    all: XREAD without `block=` does not)."""
    position, keyword, unit = _BLOCKING[call.command]
    value = call.keyword(keyword)
    if value is None and len(call.args) > position:
        value = call.args[position]
    if value is None:
        if call.command in ("xread", "xreadgroup"):
            return None, False
        return 0.0, True  # redis-py's default timeout=0: block forever
    if isinstance(value, ast.Constant) and isinstance(value.value, int | float):
        return float(value.value) * unit, True
    if isinstance(value, ast.Constant) and value.value is None:
        return None, False
    return None, True


def _blocking_advice(ctx: FileContext) -> str:
    """What to say about the blocking commands of the file: a socket_timeout below their
    block time makes them fail with TimeoutError."""
    longest: tuple[float, RedisCall] | None = None
    forever: RedisCall | None = None
    unknown: RedisCall | None = None
    for call in ctx.commands(*_BLOCKING):
        seconds, blocks = _block_time(call)
        if not blocks:
            continue
        if seconds is None:
            unknown = unknown or call
        elif seconds == 0:
            forever = forever or call
        elif longest is None or seconds > longest[0]:
            longest = (seconds, call)
    if forever is not None:
        return (
            f"; this file's {forever.name} (line {forever.node.lineno}) blocks forever, which "
            "no socket_timeout allows: give it a finite timeout in a loop and pass a "
            "socket_timeout above that timeout"
        )
    if longest is not None:
        seconds, call = longest
        return (
            f"; it must exceed the block time of this file's {call.name} (line "
            f"{call.node.lineno}, {seconds:g} s), or that command fails with TimeoutError: "
            f"pass socket_timeout={seconds + 5:g} or more"
        )
    if unknown is not None:
        return (
            f"; it must exceed the block time of this file's {unknown.name} (line "
            f"{unknown.node.lineno}), or that command fails with TimeoutError"
        )
    return (
        " (above the block time of any BLPOP/BRPOP/BLMOVE/XREAD BLOCK the client runs, "
        "or that command fails with TimeoutError)"
    )


@rule("SW008", "no-socket-timeout")
def check(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """redis-py's clients and pools default to socket_timeout=None: a read waits forever.
    A server that freezes (a long Lua script, a fork under memory pressure, a paused VM)
    or a network path that drops packets without a reset then hangs every thread or task
    that calls it, and the outage spreads to the callers. Alibaba's Redis guidelines
    (seed 002) ask for explicit connection and read timeouts on every client.

    Fix: `redis.Redis(..., socket_timeout=1.0, socket_connect_timeout=1.0)` (seconds,
    above your slowest expected command), the same on `from_url`, `RedisCluster` and
    `ConnectionPool`, or `?socket_timeout=1` in the URL. A client that runs blocking
    commands (BLPOP, BRPOP, BLMOVE, BZPOPMIN, XREAD BLOCK...) needs a socket_timeout above
    their block time, or they fail with TimeoutError: `blpop(keys, timeout=3)` with
    `socket_timeout=1` raises after one second. Block forever (`timeout=0`) never fits
    under a socket timeout: block for a few seconds in a loop instead. The message names
    the file's longest blocking command and the smallest safe value. Not reported when
    the call passes `**kwargs` (the option may be in them) or a `connection_pool=` (the
    pool is checked where it is built).
    """
    advice: str | None = None
    for node in ctx.nodes:
        if not isinstance(node, ast.Call):
            continue
        built = ctx.inference.constructor(node)
        if built is None:
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "from_pool":
            continue
        names = {k.arg for k in node.keywords}
        if "socket_timeout" in names or None in names or "connection_pool" in names:
            continue
        if _url_sets_timeout(node):
            continue
        what = "connection pool" if built is Constructor.POOL else "redis client"
        if advice is None:
            advice = _blocking_advice(ctx)
        yield (
            node,
            (
                f"{what} without socket_timeout waits forever on a frozen server or a silent "
                f"network; pass socket_timeout=<seconds> (and socket_connect_timeout){advice}"
            ),
        )
