"""SW005: a lock released with a plain DEL."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from seawall.lint._context import FileContext, RedisCall, same_expression
from seawall.lint._model import rule
from seawall.lint.rules.lock_expiry import _LOCK_WORDS, _RELEASE_WORDS, _words, looks_like_a_lock

_RELEASES = ("delete", "unlink")


def _compared_get(
    ctx: FileContext, release: RedisCall, all_gets: dict[str, list[RedisCall]]
) -> bool:
    """Whether the release sits under an `if` that tests a GET of the same key, directly
    (`if r.get(k) == token:`) or through a name assigned from it in the same function."""
    scope = ctx.scope_of(release.node)
    gets = [g for g in ctx.with_key(all_gets, release) if ctx.scope_of(g.node) is scope]
    if not gets:
        return False
    read_into = set()
    for get in gets:
        parent = ctx.parents.get(get.node)
        while isinstance(parent, ast.Await):
            parent = ctx.parents.get(parent)
        if isinstance(parent, ast.Assign | ast.NamedExpr | ast.AnnAssign):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            read_into |= {t.id for t in targets if isinstance(t, ast.Name)}
    get_nodes = {g.node for g in gets}
    child: ast.AST = release.node
    for ancestor in ctx.ancestors(release.node):
        if ancestor is scope:
            break
        if isinstance(ancestor, ast.If | ast.While) and child is not ancestor.test:
            for node in ast.walk(ancestor.test):
                if node in get_nodes or (isinstance(node, ast.Name) and node.id in read_into):
                    return True
        child = ancestor
    return False


def _watched(ctx: FileContext, release: RedisCall, watches: list[RedisCall]) -> bool:
    """Whether the same function WATCHes the released key before the DEL: the DEL then
    runs in a MULTI/EXEC that fails if the key changed after the WATCH."""
    scope = ctx.scope_of(release.node)
    key = ctx.resolved(release.key, scope)
    return any(
        ctx.scope_of(w.node) is scope
        and w.node.lineno <= release.node.lineno
        and any(same_expression(ctx.resolved(a, scope), key) for a in w.args)
        for w in watches
    )


@rule("SW005", "del-release")
def check(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """A lock released with a plain DEL removes whatever is in the key: if the holder ran
    past its TTL, the lock expired and another client took it, this DEL releases the other
    client's lock and a third one walks in (seed 003 deletes the key to break an expired
    lock, seed 000 releases with DEL). Checking first with GET and then deleting does not
    help: the lock can change hands between the two commands.

    Fix: store a random token when taking the lock and release with one Lua script that
    deletes only if the key still holds that token (redis-py's Lock, `seawall.Lock`).
    Reported at a DEL (or UNLINK: the same race) of a key the file sets with SETNX or
    `set(..., nx=True)` as a lock (the key or the setting function is named for a lock,
    or the DEL sits in a release/unlock/__exit__), and at a DEL under an `if` that
    compares a GET of the same key. A cache's "add" (SET NX of a value, later deleted as
    an ordinary key) is not a lock.
    UNLINK of any other key is fine and never reported, and so is a DEL of a key the same
    function WATCHes first (the check-and-delete is then one optimistic transaction).
    """
    locks = [
        c for c in ctx.calls if c.command == "setnx" or (c.command == "set" and c.has_keyword("nx"))
    ]
    watches = list(ctx.commands("watch"))
    gets = ctx.by_key(ctx.commands("get"))
    grouped_locks = ctx.by_key(locks)
    for call in ctx.commands(*_RELEASES):
        if len(call.args) > 1:
            continue  # deleting many keys at once is cleanup, not a release
        if _watched(ctx, call, watches):
            continue  # WATCH, GET, compare, MULTI, DEL, EXEC: the transaction is atomic
        if _compared_get(ctx, call, gets):
            yield (
                call.node,
                (
                    "GET, compare, then DEL is not atomic: the lock can expire and pass to another "
                    "client in between and this DEL removes theirs; compare the token and delete "
                    "in one Lua script (or use seawall.Lock)"
                ),
            )
        elif _releases(ctx, call) and any(
            looks_like_a_lock(ctx, lock, [call]) for lock in ctx.with_key(grouped_locks, call)
        ):
            yield (
                call.node,
                (
                    f"lock key released with a plain {call.name}: if the lock expired "
                    "and another client took it, this removes their lock; delete only if the key "
                    "still holds your token, in one Lua script (or use seawall.Lock)"
                ),
            )


def _releases(ctx: FileContext, call: RedisCall) -> bool:
    """The DEL is a release: in a function named for one (release, unlock, __exit__...),
    or of a key named for a lock. A cache's general `delete(key)` beside its `set_lock(key)`
    deletes every kind of key, not the lock in particular."""
    scope = ctx.scope_of(call.node)
    if _RELEASE_WORDS.search(getattr(scope, "name", "")):
        return True
    key = ctx.resolved(call.key, scope)
    return any(_LOCK_WORDS.search(word) for word in _words(key))
