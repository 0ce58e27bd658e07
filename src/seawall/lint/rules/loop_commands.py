"""SW006: one command per loop iteration where MGET or a pipeline fits."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from seawall.lint._bindings import Kind
from seawall.lint._context import FileContext, RedisCall
from seawall.lint._model import rule

# Commands that touch one key and answer at once: n of them cost n round trips, and a
# pipeline (or the command's own multi-key form) sends them in one. UNLINK is left out:
# it is the non-blocking delete this linter recommends elsewhere.
_STRINGS = ("get", "set", "getex", "getdel", "setex", "psetex", "setnx", "append", "strlen")
_COUNTERS = ("incr", "incrby", "incrbyfloat", "decr", "decrby")
_KEYSPACE = ("exists", "delete", "expire", "pexpire", "expireat", "ttl", "pttl", "persist", "type")
_HASHES = ("hget", "hset", "hsetnx", "hmget", "hmset", "hgetall", "hdel", "hexists", "hincrby")
_HASHES_MORE = ("hincrbyfloat", "hlen", "hkeys", "hvals")
_SETS = ("sadd", "srem", "sismember", "smismember", "scard", "smembers")
_ZSETS = ("zadd", "zrem", "zscore", "zincrby", "zrank", "zrevrank", "zcard", "zrange")
_LISTS = ("lpush", "rpush", "lpop", "rpop", "llen", "lrange", "lindex", "lset")
_OTHERS = ("pfadd", "xadd", "getbit", "setbit")
PER_KEY_COMMANDS = frozenset(
    _STRINGS + _COUNTERS + _KEYSPACE + _HASHES + _HASHES_MORE + _SETS + _ZSETS + _LISTS + _OTHERS
)
# The command's own multi-key form, for a key that changes with each pass...
_MULTI_KEY = {"get": "MGET", "set": "MSET", "exists": "EXISTS", "delete": "UNLINK"}
# ...or its multi-member form, for one key and a member that changes.
_MULTI_MEMBER = {
    "hget": "HMGET",
    "hset": "HSET with mapping=",
    "hdel": "HDEL",
    "sadd": "SADD",
    "srem": "SREM",
    "sismember": "SMISMEMBER",
    "zadd": "ZADD with a mapping",
    "zrem": "ZREM",
    "lpush": "LPUSH",
    "rpush": "RPUSH",
}


def _bound_names(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _assigned_in(body: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def _derived(body: list[ast.stmt], names: set[str]) -> set[str]:
    """`names` plus the names the body computes from them (`key = f"user:{uid}"`), so a
    value read back from Redis (`value = r.get(k)`) does not make a loop look per-item."""
    found = set(names)
    assignments = [
        n for s in body for n in ast.walk(s) if isinstance(n, ast.Assign | ast.AnnAssign)
    ]
    for _ in range(3):  # a chain of three assignments is plenty
        for assignment in assignments:
            if assignment.value is None or not _uses([assignment.value], found):
                continue
            targets = (
                assignment.targets if isinstance(assignment, ast.Assign) else [assignment.target]
            )
            found |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return found


def _varying(loop: ast.AST) -> set[str]:
    """Names that take a new value on each pass of `loop`."""
    if isinstance(loop, ast.For | ast.AsyncFor):
        return _derived(loop.body, _bound_names(loop.target))
    if isinstance(loop, ast.While):
        return _assigned_in(loop.body)
    if isinstance(loop, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        return set().union(*(_bound_names(g.target) for g in loop.generators))
    return set()


def _uses(expressions: list[ast.expr], names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for e in expressions for n in ast.walk(e))


def _per_item(call: RedisCall, loop: ast.AST, varying: set[str]) -> bool:
    """A while loop repeats a command on a changing key (`i += 1`); a retry loop polling
    the same key is not batching. A for loop or comprehension sends one command per item
    when any argument depends on the item."""
    if isinstance(loop, ast.While):
        return call.key is not None and _uses([call.key], varying)
    arguments = [*call.args, *(k.value for k in call.node.keywords)]
    return _uses(arguments, varying)


@dataclass
class _Exits:
    """What a loop body tests and whether it can leave early: computed once per loop."""

    exits: bool = False
    tested_names: set[str] = field(default_factory=set)
    tested_nodes: set[ast.AST] = field(default_factory=set)


def _exits(ctx: FileContext, loop: ast.AST) -> _Exits:
    found = _Exits()
    body = getattr(loop, "body", None)
    if not isinstance(body, list):
        return found  # a comprehension runs to the end
    for node in _own_nodes(body):
        if isinstance(node, ast.Return) or (
            isinstance(node, ast.Break) and _loop_of(ctx, node) is loop
        ):
            found.exits = True
        elif isinstance(node, ast.If | ast.While | ast.IfExp):
            for tested in ast.walk(node.test):
                found.tested_nodes.add(tested)
                if isinstance(tested, ast.Name):
                    found.tested_names.add(tested.id)
    return found


def _exits_on_hit(ctx: FileContext, call: RedisCall, exits: _Exits) -> bool:
    """Whether the loop stops at the first item whose reply answers (`for q in queues:
    job = r.lpop(q)`, `if job: return job`): batching would run the command for every
    item, and pop or change what the loop meant to leave alone."""
    if not exits.exits:
        return False
    if call.node in exits.tested_nodes:
        return True
    parent = ctx.parents.get(call.node)
    while isinstance(parent, ast.Await):
        parent = ctx.parents.get(parent)
    if isinstance(parent, ast.Assign | ast.AnnAssign | ast.NamedExpr):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        replies = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        return bool(replies & exits.tested_names)
    return False


def _decided(loop: ast.AST, sent: set[ast.AST]) -> set[ast.AST]:
    """Commands of the loop that decide, or are decided by, another command's reply in
    the same iteration (`if not r.zrange(k, 0, 0): r.delete(k) else: r.zrem(k, m)`): one
    pipeline cannot send them, as each waits for the answer before it; the fix is two
    passes, not the batching the message advises. A test of a reply with no command under
    it (`v = r.get(k)`, `if v: found.append(v)`) decides nothing: MGET still fits."""
    body = getattr(loop, "body", None)
    if not isinstance(body, list):
        return set()
    replies: dict[str, ast.AST] = {}  # name -> the command whose reply it holds
    for node in _own_nodes(body):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            value = node.value.value if isinstance(node.value, ast.Await) else node.value
            target = node.targets[0]
            if value in sent and isinstance(target, ast.Name):
                replies[target.id] = value
    decided: set[ast.AST] = set()
    for node in _own_nodes(body):
        if not isinstance(node, ast.If | ast.While):
            continue
        deciding = {n for n in ast.walk(node.test) if n in sent}
        deciding |= {
            replies[n.id]
            for n in ast.walk(node.test)
            if isinstance(n, ast.Name) and n.id in replies
        }
        if not deciding:
            continue
        under = {n for part in (node.body, node.orelse) for n in _own_nodes(part) if n in sent}
        if under:
            decided |= deciding | under
    return decided


def _own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of a loop body, without the bodies of functions defined in it."""
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            pending.extend(ast.iter_child_nodes(node))


def _loop_of(ctx: FileContext, node: ast.AST) -> ast.AST | None:
    """The loop a `break` leaves."""
    return next(
        (a for a in ctx.ancestors(node) if isinstance(a, ast.For | ast.AsyncFor | ast.While)),
        None,
    )


# What puts a pipeline's later commands in its buffer (MULTI) or back to answering at once
# (EXEC, DISCARD, WATCH before MULTI): a pipeline under WATCH sends each command as it is
# called until `multi()`, then queues them until `execute()`.
_MODES = {"multi": True, "execute": False, "reset": False, "watch": False, "unwatch": False}


class _Queued:
    """Which commands go to a pipeline's buffer after its `multi()`, found by where the
    receiver's last mode change before the command is in its function: computed once per
    function and receiver."""

    def __init__(self, ctx: FileContext) -> None:
        self._ctx = ctx
        self._changes: dict[ast.AST, dict[str, list[tuple[int, int, bool]]]] = {}

    def __call__(self, call: RedisCall) -> bool:
        func = call.node.func
        if not isinstance(func, ast.Attribute):
            return False
        scope = self._ctx.scope_of(call.node)
        changes = self._changes.get(scope)
        if changes is None:
            changes = self._changes[scope] = _mode_changes(scope)
        position = (call.node.lineno, call.node.col_offset)
        queued = False
        for line, column, multi in changes.get(ast.unparse(func.value), ()):
            if (line, column) >= position:
                break
            queued = multi
        return queued


def _mode_changes(scope: ast.AST) -> dict[str, list[tuple[int, int, bool]]]:
    found: dict[str, list[tuple[int, int, bool]]] = {}
    for node in ast.walk(scope):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in _MODES
        ):
            receiver = ast.unparse(node.func.value)
            found.setdefault(receiver, []).append(
                (node.lineno, node.col_offset, _MODES[node.func.attr])
            )
    for changes in found.values():
        changes.sort()
    return found


def _message(call: RedisCall, varying: set[str]) -> str:
    key_changes = call.key is not None and _uses([call.key], varying)
    if key_changes:
        batched = _MULTI_KEY.get(call.command)
        form = f"one {batched} of all the keys" if batched else None
    else:
        batched = _MULTI_MEMBER.get(call.command)
        form = f"one {batched} of all the members" if batched else None
    fix = f"send {form}, or queue the commands" if form else "queue the commands"
    return (
        f"{call.name} sent once per loop iteration, one round trip each; {fix} on a "
        "pipeline(transaction=False) and execute() once"
    )


@rule("SW006", "command-per-iteration")
def check(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """Each command sent on its own waits a full network round trip (0.1-1 ms on a LAN,
    far more across zones), and the server pays a read and a write system call for it.
    A loop that sends one GET per id spends nearly all its time waiting: a pipeline or
    one MGET of 100 keys costs about as much as a single GET. Alibaba's Redis guidelines
    (seed 002) recommend batching with MGET/MSET or pipelines, in batches of a few hundred.

    Fix: `r.mget(keys)`, `r.mset(mapping)`, or queue the commands on
    `with r.pipeline(transaction=False) as pipe:` and `pipe.execute()` once (batch big
    inputs). Reported at a per-key command on a client (not a pipeline) inside a for
    loop, an async for loop or a comprehension when an argument depends on the loop
    variable (directly or through names the body computes from it), or inside a while
    loop when the key is reassigned in the loop body. SETNX and `set(..., nx=True)` are
    never reported: a lock is taken on its own, and retried. Nor is a loop that stops at
    the first item whose reply answers (a `return` or `break` in the loop and a test of
    the reply, as in a priority-ordered LPOP over several queues): a pipeline would send
    the command for every item and pop from queues the loop meant to leave alone. Nor
    are commands that decide, or are decided by, another command's reply in the same
    iteration (`if not r.exists(k): r.xadd(k, ...)`): they cannot share one pipeline.
    Nor are commands sent after `multi()` on the same object in the same function (a
    pipeline under WATCH answers at once until then, and queues from then on).
    """
    # Each loop's varying names are computed once, not once per call in it: a loop of n
    # calls costs O(n), not O(n^2).
    varying: dict[ast.AST, set[str]] = {}
    exits: dict[ast.AST, _Exits] = {}
    decided: dict[ast.AST, set[ast.AST]] = {}
    sent: set[ast.AST] = {c.node for c in ctx.calls if c.receiver is Kind.CLIENT}
    queued = _Queued(ctx)
    for call in ctx.calls:
        if call.receiver is not Kind.CLIENT or call.command not in PER_KEY_COMMANDS:
            continue
        if call.command == "setnx" or call.has_keyword("nx"):
            continue  # taking a lock in a loop is a retry, and a lock is taken alone
        for loop in ctx.enclosing_loops(call.node):
            if loop not in varying:
                varying[loop] = _varying(loop)
            if _per_item(call, loop, varying[loop]):
                if loop not in exits:
                    exits[loop] = _exits(ctx, loop)
                if loop not in decided:
                    decided[loop] = _decided(loop, sent)
                if (
                    call.node not in decided[loop]
                    and not _exits_on_hit(ctx, call, exits[loop])
                    and not queued(call)
                ):
                    yield call.node, _message(call, varying[loop])
                break
