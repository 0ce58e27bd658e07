"""SW001: KEYS."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from seawall.lint._context import FileContext
from seawall.lint._model import rule


@rule("SW001", "redis-keys")
def check(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """KEYS walks the whole keyspace in one command. Redis runs commands one at a time, so
    on a server with millions of keys every other client waits for it: seconds of outage
    from one line. Alibaba's Redis guidelines (seed 002) forbid KEYS in production; SCAN
    does the same walk in small steps between other clients' commands.

    Fix: `r.scan_iter(match=pattern, count=1000)` (`async for` on redis.asyncio).
    """
    for call in ctx.commands("keys"):
        yield (
            call.node,
            (
                "KEYS blocks the server while it walks every key; "
                "iterate with scan_iter(match=..., count=...) instead"
            ),
        )
