"""SW007: whole-collection reads of keys the code never bounds."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from seawall.lint._context import FileContext, RedisCall
from seawall.lint._model import rule

WHOLE_READS = {
    "hgetall": "hscan_iter(key), or hmget() of the fields you need",
    "hkeys": "hscan_iter(key)",
    "hvals": "hscan_iter(key)",
    "smembers": "sscan_iter(key)",
    "lrange": "lrange in pages (start, start + 99), or keep the list short with ltrim",
    "zrange": "zrange in pages, or zscan_iter(key)",
    "zrevrange": "zrevrange in pages, or zscan_iter(key)",
}
# Commands that show the code keeps an eye on a key's size (or keeps it small).
BOUNDING = (
    "hlen",
    "scard",
    "llen",
    "zcard",
    "ltrim",
    "zremrangebyrank",
    "zremrangebyscore",
    "xtrim",
)


def _minus_one(expr: ast.expr | None) -> bool:
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        return isinstance(expr.operand, ast.Constant) and expr.operand.value == 1
    return isinstance(expr, ast.Constant) and expr.value in (-1, "-1")


def _reads_everything(call: RedisCall) -> bool:
    if call.command in ("lrange", "zrange", "zrevrange"):
        stop = call.args[2] if len(call.args) > 2 else call.keyword("end")
        return _minus_one(stop)
    return call.command in WHOLE_READS


# Commands that add a hash field, the field name as their second argument.
_FIELD_WRITES = ("hset", "hsetnx", "hincrby", "hincrbyfloat")


def _grows(ctx: FileContext, read: RedisCall, writes: dict[str, list[RedisCall]]) -> bool:
    """Whether the file adds fields to the hash under names it computes (`hset(key,
    session_id, ...)`, `hincrby(key, page)`, a mapping built by a comprehension): a hash
    used as a collection, not an object with a fixed set of fields."""
    for write in ctx.with_key(writes, read):
        field = write.args[1] if len(write.args) > 1 else write.keyword("key")
        mapping = write.keyword("mapping")
        computed = (field is not None and not isinstance(field, ast.Constant)) or isinstance(
            mapping, ast.DictComp
        )
        if computed:
            return True
    return False


@rule("SW007", "unbounded-read", default=False)
def check(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """HGETALL, HKEYS, HVALS, SMEMBERS and LRANGE/ZRANGE to -1 return the whole collection
    in one reply. Collections grow: at 100,000 elements one call blocks the server for
    tens of milliseconds, builds a reply of megabytes and allocates all of it in the
    client. Alibaba's Redis guidelines (seed 002) list these O(N) commands and ask for a
    known N, or HSCAN/SSCAN/ZSCAN instead.

    Fix: iterate with hscan_iter/sscan_iter/zscan_iter, read in pages, fetch only the
    fields you need, or keep the collection bounded (LTRIM, ZREMRANGEBYRANK). HGETALL is
    reported only for a hash the file fills with computed field names (HSET/HINCRBY of a
    variable field): most HGETALLs read a small object of fixed fields. Not reported
    when the same function, or another method of the same class, checks the same key's
    size (HLEN, SCARD, LLEN, ZCARD) or trims it.
    """
    bounded = ctx.by_key(ctx.commands(*BOUNDING))
    writes = ctx.by_key(ctx.commands(*_FIELD_WRITES))
    for call in ctx.calls:
        if not _reads_everything(call):
            continue
        if call.command == "hgetall" and not _grows(ctx, call, writes):
            continue  # most HGETALLs read an object of a few fixed fields
        if any(ctx.same_owner(b.node, call.node) for b in ctx.with_key(bounded, call)):
            continue
        whole = "to -1" if call.command in ("lrange", "zrange", "zrevrange") else ""
        yield (
            call.node,
            (
                f"{call.name}{' ' + whole if whole else ''} reads the whole collection "
                f"in one reply and blocks the server when it grows; use "
                f"{WHOLE_READS[call.command]}"
            ),
        )
