"""SW009: a lock taken with SETNX (or SET NX) that is never given an expiry."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from seawall.lint._bindings import Kind
from seawall.lint._context import FileContext, RedisCall
from seawall.lint._model import rule
from seawall.lint.rules.setnx_expire import EXPIRE_COMMANDS, sets_if_absent_without_expiry

# Words that say a key, or the function taking it, is a lock.
_LOCK_WORDS = re.compile(r"lock|mutex|semaphore|leader|leases?\b|acquire", re.IGNORECASE)
# Functions that give a lock back: a DEL there is a release.
_RELEASE_WORDS = re.compile(r"release|unlock|__a?exit__", re.IGNORECASE)
_RELEASES = ("delete", "unlink")


def _words(node: ast.AST | None) -> Iterator[str]:
    for child in ast.walk(node) if node is not None else ():
        if isinstance(child, ast.Name):
            yield child.id
        elif isinstance(child, ast.Attribute):
            yield child.attr
        elif isinstance(child, ast.Constant) and isinstance(child.value, str):
            yield child.value


def looks_like_a_lock(
    ctx: FileContext, call: RedisCall, releases: list[RedisCall] | dict[str, list[RedisCall]]
) -> bool:
    """The key or the function says "lock" (`f"lock:{name}"`, `self.lock_key`, `def
    acquire`), or a function named for a release (`release`, `unlock`, `__exit__`)
    deletes the key: set-if-absent used as a lock, not a cache's "add" (SET NX of a
    value, deleted again as an ordinary key)."""
    scope = ctx.scope_of(call.node)
    key = ctx.resolved(call.key, scope)
    if any(_LOCK_WORDS.search(word) for word in _words(key)):
        return True
    if _LOCK_WORDS.search(getattr(scope, "name", "")):
        return True
    if isinstance(releases, dict):
        matching = ctx.with_key(releases, call)
    else:
        matching = [r for r in releases if ctx.same_key(r, call)]
    return any(
        _RELEASE_WORDS.search(getattr(ctx.scope_of(release.node), "name", ""))
        for release in matching
    )


@rule("SW009", "lock-without-expiry")
def check(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """A lock taken with SETNX, or SET NX without EX/PX, has no expiry: when the process
    holding it crashes, is killed or loses its network before it releases, the key stays
    forever and every other process waits on a lock nobody holds, until someone deletes
    it by hand. Seed 003 adds the expiry as a second command (SW003); seed 004 explains
    that a lock needs an expiry so that a crashed holder cannot block everyone for ever.

    Fix: `r.set(key, token, nx=True, px=ttl_ms)`, and renew the lease while the work runs
    longer than the TTL (`seawall.Lock` does both, and releases by token). Reported at a
    SETNX (or `set(..., nx=True)` without ex/px/exat/pxat/keepttl) whose key the file never
    passes to EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT and never swaps with GETSET (SW004's
    recipe), when the key or the function is named for a lock, or a function named for a
    release (release, unlock, __exit__) deletes the key.
    Known false positives: a lock whose key is given its expiry in another module.
    """
    yield from _through_a_setter(ctx)
    candidates = [c for c in ctx.calls if sets_if_absent_without_expiry(c)]
    if not candidates:
        return
    given_expiry = ctx.by_key(
        c
        for c in ctx.calls
        if c.command in EXPIRE_COMMANDS
        or c.command == "getset"
        or (c.command == "set" and c.has_keyword("get"))
    )
    releases = ctx.by_key(ctx.commands(*_RELEASES))
    for call in candidates:
        if ctx.with_key(given_expiry, call):
            continue
        if not looks_like_a_lock(ctx, call, releases):
            continue
        yield (
            call.node,
            (
                "lock taken without an expiry: if its holder dies before releasing it, the "
                "key stays forever and every other process waits; use set(key, token, "
                "nx=True, px=ttl) in one command, renewed while held (or seawall.Lock)"
            ),
        )


def _through_a_setter(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """A lock class or function taking its lock through a method of the project that
    sets a key only if absent and never gives it an expiry (`self.storage.put_if_empty(
    self.key, "1")` in `TaskLock.__enter__`, SETNX in a storage class of another module)."""
    index = ctx.index
    if index is None:
        return
    for node in ast.walk(ctx.tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method = node.func.attr
        if not index.sets_without_expiry(method):
            continue
        if ctx.inference.kind(node.func.value) is Kind.CLIENT:
            continue  # a command of a client: the rule's own case
        names = [getattr(a, "name", "") for a in ctx.ancestors(node)]
        if not any(_LOCK_WORDS.search(n) for n in names if n):
            continue
        yield (
            node,
            (
                f"lock taken through {method}(), which sets its key only if absent and "
                "never gives it an expiry: if the holder dies before releasing it, the key "
                "stays forever and every other process waits; set(key, token, nx=True, "
                "px=ttl) in one command, renewed while held (or seawall.Lock)"
            ),
        )
