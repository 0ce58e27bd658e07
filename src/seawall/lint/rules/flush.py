"""SW002: FLUSHALL and FLUSHDB."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from seawall.lint._context import FileContext
from seawall.lint._model import rule


@rule("SW002", "redis-flush")
def check(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """FLUSHALL and FLUSHDB delete every key of the server (or database). Without ASYNC they
    block it until the last key is freed; with it they still erase data no code path should
    be able to erase. Alibaba's Redis guidelines (seed 002) list both among the commands to
    rename or deny with an ACL in production.

    Fix: delete what you mean to delete: `scan_iter(match=...)` and `unlink(*batch)` in
    batches (what `seawall delete --pattern` does). In a test suite against a private
    server, `# noqa: SW002` says the flush is intended.
    """
    for call in ctx.commands("flushall", "flushdb"):
        name = call.name
        yield (
            call.node,
            (
                f"{name} erases every key and blocks the server; delete by pattern with "
                "scan_iter + unlink in batches, and deny the command by ACL in production"
            ),
        )
