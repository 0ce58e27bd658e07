"""One parsed file as the rules see it: its Redis calls, and where each one sits.

Parsing, client inference and the walk that finds Redis calls happen once per file here;
the rules then only filter `FileContext.calls` and look at a call's surroundings (its
function, the loops and `if`s around it).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

from seawall.lint._bindings import Kind
from seawall.lint._names import Inference

_Function = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
_Loop = ast.For | ast.AsyncFor | ast.While
_Comprehension = ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp

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
    inference: Inference = field(init=False)
    parents: dict[ast.AST, ast.AST] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.inference = Inference.of(self.tree)
        # One traversal gives both the parent links and the node list the rules scan.
        self.nodes: list[ast.AST] = [self.tree]
        for parent in self.nodes:
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
                self.nodes.append(child)

    @classmethod
    def parse(cls, path: str, source: bytes) -> FileContext:
        """Raises SyntaxError or ValueError for anything that is not Python source."""
        return cls(path, source, ast.parse(source, filename=path))

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
        return next((a for a in self.ancestors(node) if isinstance(a, _Function)), self.tree)

    def same_key(self, a: RedisCall, b: RedisCall) -> bool:
        """Whether two calls name the same key. Keys written the same way match across the
        file (`self.key`, `f"lock:{name}"`, a constant, a parameter named `key` in both
        `acquire(key)` and `release(key)`), except a plain local variable, which only
        matches within its own function: `for key in ...` elsewhere is another key."""
        if not same_expression(a.key, b.key):
            return False
        first, second = self.scope_of(a.node), self.scope_of(b.node)
        if first is second or not isinstance(a.key, ast.Name):
            return True
        name = a.key.id
        return not (self._local_variable(name, first) or self._local_variable(name, second))

    def _local_variable(self, name: str, scope: ast.AST) -> bool:
        if not isinstance(scope, _Function) or name not in self.inference.scopes.get(scope, {}):
            return False
        args = scope.args
        parameters = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        return all(p is None or p.arg != name for p in parameters)

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
