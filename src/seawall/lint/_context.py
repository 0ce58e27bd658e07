"""One parsed file as the rules see it: its Redis calls, and where each one sits.

Parsing, client inference and the walk that finds Redis calls happen once per file here;
the rules then only filter `FileContext.calls` and look at a call's surroundings (its
function, the loops and `if`s around it).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from seawall.lint._bindings import Kind
from seawall.lint._names import Inference

if TYPE_CHECKING:
    from seawall.lint._index import ProjectIndex

_Function = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
_Loop = ast.For | ast.AsyncFor | ast.While
_Comprehension = ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp

# Function names that say two functions handle one lock, so their parameters are one key.
_LOCK_WORDS = ("lock", "release", "acquire")

# execute_command("DEL", ...) names DEL; redis-py's method for it is `delete`.
_RAW_COMMANDS = {"del": "delete"}


@dataclass(frozen=True)
class RedisCall:
    """`r.set("k", v, nx=True)` or `r.execute_command("SET", "k", v)` on a client or pipeline."""

    node: ast.Call
    command: str  # redis-py's method name in lower case: "keys", "delete", "set", ...
    args: tuple[ast.expr, ...]  # positional arguments after the command name
    receiver: Kind  # Kind.CLIENT or Kind.PIPELINE

    def keyword(self, name: str) -> ast.expr | None:
        return next((k.value for k in self.node.keywords if k.arg == name), None)

    def has_keyword(self, name: str) -> bool:
        """True if `name=` is passed as anything but a literal False/None/0."""
        value = self.keyword(name)
        if value is None:
            return False
        return not (isinstance(value, ast.Constant) and not value.value)

    @property
    def key(self) -> ast.expr | None:
        """The first key argument (`name=` is what redis-py calls it)."""
        if self.args and not isinstance(self.args[0], ast.Starred):
            return self.args[0]
        return self.keyword("name") or self.keyword("key")

    @property
    def name(self) -> str:
        """The command as Redis spells it: `delete` is DEL."""
        return "DEL" if self.command == "delete" else self.command.upper()

    @property
    def raw(self) -> bool:
        """Sent through execute_command: option keywords are words in `args` then."""
        return (
            isinstance(self.node.func, ast.Attribute) and self.node.func.attr == "execute_command"
        )


def same_expression(a: ast.expr | None, b: ast.expr | None) -> bool:
    """Whether two key expressions are written the same way (`self.key`, `f"lock:{n}"`)."""
    if a is None or b is None:
        return False
    return ast.dump(a) == ast.dump(b)


@dataclass
class FileContext:
    path: str
    source: bytes
    tree: ast.Module
    index: ProjectIndex | None = None
    module: str | None = None
    package: str | None = None
    # An inference of this tree built by the project's first pass, reused.
    prepared: Inference | None = None
    inference: Inference = field(init=False)
    parents: dict[ast.AST, ast.AST] = field(init=False, default_factory=dict)
    _scopes: dict[ast.AST, ast.AST] = field(init=False, default_factory=dict)
    _key_texts: dict[ast.AST, str | None] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.prepared is not None:
            self.inference = self.prepared
            if self.index is not None:
                self.inference.use_index(self.index)
        else:
            self.inference = Inference.of(self.tree, self.index, self.module, self.package)
        # One traversal gives both the parent links and the node list the rules scan.
        self.nodes: list[ast.AST] = [self.tree]
        for parent in self.nodes:
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
                self.nodes.append(child)

    @classmethod
    def parse(
        cls,
        path: str,
        source: bytes,
        index: ProjectIndex | None = None,
        module: str | None = None,
        package: str | None = None,
    ) -> FileContext:
        """Raises SyntaxError or ValueError for anything that is not Python source."""
        return cls(path, source, ast.parse(source, filename=path), index, module, package)

    @cached_property
    def calls(self) -> list[RedisCall]:
        """Every call of a command on a redis client or pipeline, in source order."""
        found = []
        for node in self.nodes:
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            receiver = self.inference.kind(node.func.value)
            if receiver not in (Kind.CLIENT, Kind.PIPELINE):
                continue
            command, args = node.func.attr.lower(), tuple(node.args)
            if command == "execute_command":
                first = args[0] if args else None
                if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                    continue
                command = first.value.lower()
                command = _RAW_COMMANDS.get(command, command)
                args = args[1:]
            found.append(RedisCall(node, command, args, receiver))
        found.sort(key=lambda c: (c.node.lineno, c.node.col_offset))
        return found

    def commands(self, *names: str) -> Iterator[RedisCall]:
        return (c for c in self.calls if c.command in names)

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        while node in self.parents:
            node = self.parents[node]
            yield node

    def scope_of(self, node: ast.AST) -> ast.AST:
        """The function (or the module) whose body holds `node`."""
        found = self._scopes.get(node)
        if found is None:
            found = next((a for a in self.ancestors(node) if isinstance(a, _Function)), self.tree)
            self._scopes[node] = found
        return found

    def key_text(self, call: RedisCall) -> str | None:
        """The call's key, resolved through a local variable assigned once, as text:
        computed once per call, so rules that pair calls compare strings."""
        if call.node not in self._key_texts:
            key = self.resolved(call.key, self.scope_of(call.node))
            self._key_texts[call.node] = None if key is None else ast.dump(key)
        return self._key_texts[call.node]

    def by_key(self, calls: Iterable[RedisCall]) -> dict[str, list[RedisCall]]:
        """Calls grouped by `key_text`: a rule looks up the few calls that can share a
        key instead of comparing every pair (linear, not quadratic, in the calls)."""
        grouped: dict[str, list[RedisCall]] = {}
        for call in calls:
            text = self.key_text(call)
            if text is not None:
                grouped.setdefault(text, []).append(call)
        return grouped

    def with_key(self, grouped: dict[str, list[RedisCall]], call: RedisCall) -> list[RedisCall]:
        """The calls of `grouped` that name the same key as `call` (`same_key`)."""
        text = self.key_text(call)
        if text is None:
            return []
        return [other for other in grouped.get(text, ()) if self.same_key(other, call)]

    def same_key(self, a: RedisCall, b: RedisCall) -> bool:
        """Whether two calls name the same key. A local variable stands for the value it
        is assigned once in its function (`key = f"lock:{name}"` in both `acquire` and
        `release`); keys then match when written the same way. Across two functions, a
        key built from a parameter (`key`, `name`) only matches when the functions are
        methods of one class, or module-level functions one of which says it deals with
        a lock (acquire, release, lock, unlock): two unrelated functions' `key`
        parameters are different keys. A
        local variable assigned more than once, or a loop variable, only matches within its
        own function."""
        text = self.key_text(a)
        if text is None or text != self.key_text(b):
            return False
        first, second = self.scope_of(a.node), self.scope_of(b.node)
        if first is second:
            return True
        key_a = self.resolved(a.key, first)
        assert key_a is not None
        names = {n.id for n in ast.walk(key_a) if isinstance(n, ast.Name)}
        if any(self._local_variable(n, first) or self._local_variable(n, second) for n in names):
            return False
        if any(self._parameter(n, first) or self._parameter(n, second) for n in names):
            return self._related(first, second)
        return True

    def resolved(self, key: ast.expr | None, scope: ast.AST) -> ast.expr | None:
        """`key` itself, or for a local variable assigned exactly once in `scope`, the
        expression it was assigned (followed through a few such variables)."""
        for _ in range(3):
            if not isinstance(key, ast.Name) or not self._local_variable(key.id, scope):
                return key
            bindings = self.inference.scopes.get(scope, {}).get(key.id, [])
            if len(bindings) != 1 or bindings[0].value is None:
                return key
            key = bindings[0].value
        return key

    def _parameter(self, name: str, scope: ast.AST) -> bool:
        if not isinstance(scope, _Function):
            return False
        args = scope.args
        parameters = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        return any(p is not None and p.arg == name for p in parameters)

    def _related(self, first: ast.AST, second: ast.AST) -> bool:
        """Methods of one class; or two module-level functions, one of them named for a
        lock (`acquire(key)` and `release(key)`). A method and a module-level function
        never share a parameter's meaning."""
        methods = self.inference.method_class
        owner = methods.get(first)
        if owner is not None or methods.get(second) is not None:
            return owner is not None and owner is methods.get(second)
        return any(
            isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            and any(word in f.name.lower() for word in _LOCK_WORDS)
            for f in (first, second)
        )

    def same_owner(self, a: ast.AST, b: ast.AST) -> bool:
        """Whether two nodes sit in one function, or in methods of one class."""
        first, second = self.scope_of(a), self.scope_of(b)
        if first is second:
            return True
        owner = self.inference.method_class.get(first)
        return owner is not None and owner is self.inference.method_class.get(second)

    def _local_variable(self, name: str, scope: ast.AST) -> bool:
        if not isinstance(scope, _Function) or name not in self.inference.scopes.get(scope, {}):
            return False
        return not self._parameter(name, scope)

    def enclosing_loops(self, node: ast.AST) -> Iterator[ast.AST]:
        """Loops and comprehensions around `node` inside its own function, innermost first.
        A loop only counts if `node` is in its body (or a comprehension's element), not in
        the iterable or the while-condition, which run once or are the loop's own test."""
        child, grandchild = node, node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, _Function):
                return
            if (
                isinstance(ancestor, ast.For | ast.AsyncFor | ast.While) and child in ancestor.body
            ) or (
                isinstance(ancestor, _Comprehension)
                and not (
                    child is ancestor.generators[0] and grandchild is ancestor.generators[0].iter
                )
            ):
                yield ancestor
            child, grandchild = ancestor, child
