"""SW008: a client or connection pool built without socket_timeout."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from seawall.lint._context import FileContext
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


@rule("SW008", "no-socket-timeout")
def check(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """redis-py's clients and pools default to socket_timeout=None: a read waits forever.
    A server that freezes (a long Lua script, a fork under memory pressure, a paused VM)
    or a network path that drops packets without a reset then hangs every thread or task
    that calls it, and the outage spreads to the callers. Alibaba's Redis guidelines
    (seed 002) ask for explicit connection and read timeouts on every client.

    Fix: `redis.Redis(..., socket_timeout=1.0, socket_connect_timeout=1.0)` (seconds,
    above your slowest expected command), the same on `from_url`, `RedisCluster` and
    `ConnectionPool`, or `?socket_timeout=1` in the URL. Not reported when the call passes
    `**kwargs` (the option may be in them) or a `connection_pool=` (the pool is checked
    where it is built).
    """
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
        yield (
            node,
            (
                f"{what} without socket_timeout waits forever on a frozen server or a silent "
                "network; pass socket_timeout=<seconds> (and socket_connect_timeout)"
            ),
        )
