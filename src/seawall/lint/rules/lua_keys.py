"""SW010: KEYS, FLUSHALL or FLUSHDB called from a Lua script."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from seawall.lint._context import FileContext
from seawall.lint._model import rule

# redis.call('KEYS', ...) / redis.pcall("flushdb"): Lua's way to send a command.
_CALL = re.compile(
    r"""redis\s*\.\s*p?call\s*\(\s*(?P<quote>['"])(?P<command>keys|flushall|flushdb)(?P=quote)""",
    re.IGNORECASE,
)
_LUA_NOQA = re.compile(r"--\s*noqa(?::\s*(?P<codes>[A-Z0-9,\s]+))?", re.IGNORECASE)


def _message(command: str) -> str:
    if command == "KEYS":
        what = "walks every key of the server inside one script, which nothing can interrupt"
        fix = "iterate with SCAN in the client and pass the keys in KEYS[]"
    else:
        what = "erases every key, from inside a script that nothing can interrupt"
        fix = "delete the keys you mean to, passed in KEYS[], or scan_iter + unlink in batches"
    return (
        f"{command} in a Lua script {what}, blocking every other client, and cannot run on "
        f"Redis Cluster; {fix}"
    )


def scan_lua(text: str) -> Iterator[tuple[int, int, str]]:
    """(1-based line, 1-based column, message) of each KEYS/FLUSH* call in Lua source,
    leaving out `--` comments and lines marked `-- noqa` (or `-- noqa: SW010`)."""
    for number, line in enumerate(text.splitlines(), start=1):
        comment = line.find("--")
        noqa = _LUA_NOQA.search(line) if comment >= 0 else None
        if noqa and (noqa.group("codes") is None or "SW010" in noqa.group("codes").upper()):
            continue
        for match in _CALL.finditer(line):
            if 0 <= comment < match.start():
                continue
            yield number, match.start() + 1, _message(match.group("command").upper())


class _Position(ast.expr):
    """A place inside a string literal, for the runner's line and column."""


def _docstring(ctx: FileContext, node: ast.Constant) -> bool:
    return isinstance(ctx.parents.get(node), ast.Expr)


@rule("SW010", "keys-in-lua")
def check(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """A Lua script runs as one command: while it runs, Redis serves no other client. A
    script that calls KEYS walks the whole keyspace inside that command (seed 002 forbids
    KEYS in production, and asks that every key a script touches come in KEYS[] so it can
    run on Redis Cluster); one that calls FLUSHALL or FLUSHDB erases everything. Seed 004
    explains why EVAL is atomic: that is exactly why a slow script stalls the server.

    Fix: find the keys in the client with `scan_iter(match=..., count=...)` and pass them
    to the script in KEYS[] (in batches), or delete what you mean to with `unlink`.
    Reported at a `redis.call`/`redis.pcall` of KEYS, FLUSHALL or FLUSHDB inside a
    Python string or bytes literal (a script given to `register_script`, `eval` or a
    constant),
    and in `.lua` files under the checked paths. Docstrings and Lua comments are left
    out. Known false positives: a string that only quotes such a script as an example.
    """
    for node in ctx.nodes:
        if not isinstance(node, ast.Constant):
            continue
        if isinstance(node.value, bytes):  # b"""...""": scripts are often kept as bytes
            text = node.value.decode("utf-8", "replace")
        elif isinstance(node.value, str):
            text = node.value
        else:
            continue
        if "call" not in text or _docstring(ctx, node):
            continue
        for line, column, message in scan_lua(text):
            position = _Position()
            position.lineno = node.lineno + line - 1
            position.end_lineno = position.lineno
            if line == 1:
                position.col_offset = node.col_offset
            else:
                # A triple-quoted script keeps its indentation: the column is the source's.
                source_line = text.splitlines()[line - 1]
                position.col_offset = len(source_line[: column - 1].encode("utf-8"))
            yield position, message
