"""Where each name of a file is bound, and to what: the raw material of client inference.

One pass over the tree records imports, every binding of every name per scope (module,
function, lambda, class body, comprehension), assignments to attributes (`self.redis =`),
return annotations, and the chain of scopes each loaded name is looked up in, following
Python's rules (a method does not see its class body's names). `seawall.lint._names`
then judges the bindings.
"""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass, field

# aioredis: the package redis.asyncio grew from, same API, still imported by older code.
PACKAGES = frozenset({"redis", "valkey", "aioredis"})


def dotted(expr: ast.expr) -> str | None:
    """`self.redis` -> "self.redis"; `cls.redis` counts as `self.redis`; None if not a chain
    of attributes on a name."""
    if isinstance(expr, ast.Name):
        return "self" if expr.id == "cls" else expr.id
    if isinstance(expr, ast.Attribute):
        base = dotted(expr.value)
        return None if base is None else f"{base}.{expr.attr}"
    return None


class Kind(enum.Enum):
    CLIENT = "client"
    PIPELINE = "pipeline"
    OTHER = "other"  # known not to be a client: a literal, a loop variable, a module
    UNKNOWN = "unknown"  # no evidence: the name decides


@dataclass
class Binding:
    kind: Kind = Kind.UNKNOWN
    value: ast.expr | None = None
    annotation: ast.expr | None = None
    # `for conn in clients`: the name takes each element of this collection in turn.
    element_of: ast.expr | None = None
    # `from app.store import client`: "app.store.client", looked up in the project index.
    origin: str | None = None
    # A parameter of a class's `__init__`: what its callers pass decides (constructor
    # injection, `Cache(self)` inside a Redis subclass). Its position among the
    # positional arguments after self, or None for a keyword-only one.
    init_of: ast.ClassDef | None = None
    position: int | None = None
    parameter: str | None = None


# Methods only a redis client (or pipeline) has: an object that receives one of them in a
# file that imports redis is a client whatever its name (`self.connection.zadd(...)`).
# Names other objects share (get, set, delete, keys, incr, expire, publish...) are left out.
REDIS_ONLY_METHODS = frozenset(
    {
        *("setnx", "setex", "psetex", "getset", "mget", "mset", "msetnx", "incrby", "decrby"),
        *("incrbyfloat", "hget", "hset", "hsetnx", "hmget", "hmset", "hgetall", "hkeys"),
        *("hvals", "hlen", "hdel", "hexists", "hincrby", "hincrbyfloat", "hscan_iter"),
        *("lpush", "rpush", "lpop", "rpop", "lrange", "ltrim", "llen", "lrem", "lindex"),
        *("blpop", "brpop", "brpoplpush", "blmove", "lmove", "rpoplpush", "sadd", "srem"),
        *("smembers", "sismember", "scard", "spop", "srandmember", "sscan_iter", "sinter"),
        *("sunion", "sdiff", "zadd", "zrem", "zscore", "zincrby", "zrange", "zrevrange"),
        *("zrangebyscore", "zrevrangebyscore", "zcard", "zcount", "zrank", "zrevrank"),
        *("zremrangebyscore", "zremrangebyrank", "zscan_iter", "pexpire", "expireat"),
        *("pexpireat", "pttl", "flushdb", "flushall", "scan_iter", "evalsha", "script_load"),
        *("register_script", "xadd", "xreadgroup", "xack", "xlen", "pfadd", "pfcount"),
        *("setbit", "getbit", "bitcount", "unlink"),
    }
)

# Modules whose names hold configuration: `from app.settings import REDIS` is a URL or a
# dict of options far more often than a client, whatever its name says.
SETTINGS_MODULES = frozenset({"settings", "config", "conf", "configuration", "constants"})


def from_settings(module: str) -> bool:
    return any(part in SETTINGS_MODULES for part in module.split("."))


Scope = ast.AST  # a Module, function, Lambda, class body or comprehension
# An attribute is keyed by the class whose methods assign it (`self.client` of class A is
# not `self.client` of class B) or, outside classes, by None: (owner, "self.client").
AttributeKey = tuple[ast.ClassDef | None, str]


@dataclass
class Bindings:
    imports: dict[str, str] = field(default_factory=dict)  # local name -> dotted origin
    scopes: dict[Scope, dict[str, list[Binding]]] = field(default_factory=dict)
    attributes: dict[AttributeKey, list[Binding]] = field(default_factory=dict)
    # What is put into a collection: `x.append(v)`, `x[k] = v`, `x.add(v)`.
    elements: dict[AttributeKey, list[ast.expr]] = field(default_factory=dict)
    chains: dict[ast.Name, tuple[Scope, ...]] = field(default_factory=dict)
    returns: dict[str, list[ast.expr]] = field(default_factory=dict)  # function -> annotations
    # What each function's `return` statements return, by function name (factories).
    returned: dict[str, list[ast.expr]] = field(default_factory=dict)
    returned_by: dict[Scope, list[ast.expr]] = field(default_factory=dict)  # per function
    classes: dict[str, list[ast.ClassDef]] = field(default_factory=dict)  # name -> classes
    method_class: dict[Scope, ast.ClassDef] = field(default_factory=dict)
    # Receivers of a REDIS_ONLY_METHODS call: attributes keyed as attributes are, and the
    # names themselves (judged in the scope that binds them).
    duck_clients: set[AttributeKey] = field(default_factory=set)
    duck_names: list[ast.Name] = field(default_factory=list)
    # Calls by the callee's last name (`Cache(...)`, `walrus.Cache(...)` -> "Cache").
    call_sites: dict[str, list[ast.Call]] = field(default_factory=dict)
    imports_redis: bool = False
    # The file's dotted module name and package, when it is part of a project: relative
    # imports resolve against the package.
    module: str | None = None
    package: str | None = None

    def owner(self, chain: tuple[Scope, ...]) -> ast.ClassDef | None:
        """The class of the method a chain of scopes sits in (through nested functions,
        lambdas and comprehensions), or the class whose body it is."""
        for scope in chain:
            if isinstance(scope, ast.ClassDef):
                return scope
            found = self.method_class.get(scope)
            if found is not None:
                return found
        return None


class Collector(ast.NodeVisitor):
    """Records imports, every binding per scope, attribute assignments, and the scope
    chain each loaded name is looked up in."""

    def __init__(self, bindings: Bindings) -> None:
        self.bindings = bindings
        self.chain: tuple[Scope, ...] = ()
        # The functions being visited, innermost last (their names key `returned`).
        self.functions: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda] = []
        self.current_class: ast.ClassDef | None = None  # the class whose body is visited

    # scopes

    def visit_Module(self, node: ast.Module) -> None:
        self.chain = (node,)
        self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]:
            self.visit(default)
        if not isinstance(node, ast.Lambda):
            self._bind_name(node.name, Binding(Kind.OTHER))
            for decorator in node.decorator_list:
                self.visit(decorator)
            if node.returns is not None:
                self.bindings.returns.setdefault(node.name, []).append(node.returns)
            if self.current_class is not None and self.chain[0] is self.current_class:
                self.bindings.method_class[node] = self.current_class
        outer, outer_class = self.chain, self.current_class
        # Methods do not see their class body's names (Python's scoping rule).
        self.chain = (node, *(s for s in outer if not isinstance(s, ast.ClassDef)))
        self.current_class = None
        self.functions.append(node)
        args = node.args
        owner = self.bindings.method_class.get(node)
        init_of = owner if owner is not None and getattr(node, "name", "") == "__init__" else None
        positional = [*args.posonlyargs, *args.args]
        for index, arg in enumerate(positional):
            binding = Binding(Kind.UNKNOWN, annotation=arg.annotation)
            if init_of is not None and index > 0:
                binding.init_of, binding.position = init_of, index - 1
                binding.parameter = arg.arg
            self._bind_name(arg.arg, binding)
        for arg in args.kwonlyargs:
            self._bind_name(
                arg.arg,
                Binding(
                    Kind.UNKNOWN, annotation=arg.annotation, init_of=init_of, parameter=arg.arg
                ),
            )
        for rest in (args.vararg, args.kwarg):
            if rest is not None:
                self._bind_name(rest.arg, Binding(Kind.UNKNOWN, annotation=rest.annotation))
        body = node.body if isinstance(node.body, list) else [node.body]
        for statement in body:
            self.visit(statement)
        self.functions.pop()
        self.chain, self.current_class = outer, outer_class

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._bind_name(node.name, Binding(Kind.OTHER))
        self.bindings.classes.setdefault(node.name, []).append(node)
        for expr in [*node.bases, *node.decorator_list]:
            self.visit(expr)
        outer, outer_class = self.chain, self.current_class
        self.chain = (node, *outer)
        self.current_class = node
        for statement in node.body:
            # A class-level `redis: Redis` or `redis = Redis()` types `self.redis`.
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                self._bind_attribute(
                    f"self.{statement.target.id}",
                    Binding(annotation=statement.annotation, value=statement.value),
                )
            elif isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        self._bind_attribute(f"self.{target.id}", Binding(value=statement.value))
            self.visit(statement)
        self.chain, self.current_class = outer, outer_class

    def _comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
    ) -> None:
        outer = self.chain
        self.visit(node.generators[0].iter)  # evaluated in the enclosing scope
        self.chain = (node, *outer)
        for position, generator in enumerate(node.generators):
            if position:
                self.visit(generator.iter)
            self._bind_target(generator.target, Binding(Kind.OTHER))
            for condition in generator.ifs:
                self.visit(condition)
        if isinstance(node, ast.DictComp):
            self.visit(node.key)
            self.visit(node.value)
        else:
            self.visit(node.elt)
        self.chain = outer

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    # names

    def visit_Name(self, node: ast.Name) -> None:
        self.bindings.chains[node] = self.chain

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            top = alias.name.split(".")[0]
            local = alias.asname or top
            origin = alias.name if alias.asname else top
            self.bindings.imports[local] = origin
            self.bindings.imports_redis |= top in PACKAGES
            self._bind_name(local, Binding(Kind.OTHER if top in PACKAGES else Kind.UNKNOWN))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        from_redis = node.level == 0 and module.split(".")[0] in PACKAGES
        self.bindings.imports_redis |= from_redis
        if node.level:
            module = self._absolute(module, node.level) or ""
        for alias in node.names:
            local = alias.asname or alias.name
            origin = f"{module}.{alias.name}" if module else None
            if origin is not None:
                self.bindings.imports[local] = origin
            known_other = from_redis or from_settings(f"{node.module or ''}.{alias.name}")
            self._bind_name(
                local,
                Binding(Kind.OTHER, origin=None)
                if known_other
                else Binding(Kind.UNKNOWN, origin=origin),
            )

    def _absolute(self, module: str, level: int) -> str | None:
        """`from ..store import x` in package a.b.c -> "a.b.store"; None outside a project."""
        package = self.bindings.package
        if package is None:
            return None
        parts = package.split(".") if package else []
        if level - 1 > len(parts):
            return None
        base = parts[: len(parts) - (level - 1)]
        return ".".join([*base, *([module] if module else [])]) or None

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self.visit(node.value)
            if self.functions:
                function = self.functions[-1]
                self.bindings.returned_by.setdefault(function, []).append(node.value)
                if not isinstance(function, ast.Lambda):
                    self.bindings.returned.setdefault(function.name, []).append(node.value)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in REDIS_ONLY_METHODS:
            if isinstance(func.value, ast.Name):
                if func.value.id not in ("self", "cls"):  # self: its class decides
                    self.bindings.duck_names.append(func.value)
            else:
                receiver = self._attribute_key(func.value)
                if receiver is not None:
                    self.bindings.duck_clients.add(receiver)
        callee = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if callee is not None and callee[:1].isupper():  # a class, most likely
            self.bindings.call_sites.setdefault(callee, []).append(node)
        if (
            isinstance(func, ast.Attribute)
            and func.attr in ("append", "add", "insert", "appendleft")
            and node.args
        ):
            key = self._attribute_key(func.value)
            if key is not None:
                self.bindings.elements.setdefault(key, []).append(node.args[-1])
        self.generic_visit(node)

    # bindings

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self._bind_target(target, Binding(value=node.value), node.value)
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self._bind_target(node.target, Binding(annotation=node.annotation, value=node.value))
        self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        self._bind_target(node.target, Binding(Kind.UNKNOWN))
        self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind_target(node.target, Binding(value=node.value))

    def _loop(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        if isinstance(node.target, ast.Name):
            self._bind_target(node.target, Binding(Kind.OTHER, element_of=node.iter))
        elif (
            isinstance(node.target, ast.Tuple)
            and len(node.target.elts) == 2
            and isinstance(node.iter, ast.Call)
            and isinstance(node.iter.func, ast.Attribute)
            and node.iter.func.attr == "items"
        ):
            # `for name, conn in clients.items()`: the second name takes the values.
            values = ast.Call(
                func=ast.Attribute(value=node.iter.func.value, attr="values", ctx=ast.Load()),
                args=[],
                keywords=[],
            )
            self._bind_target(node.target.elts[0], Binding(Kind.OTHER))
            self._bind_target(node.target.elts[1], Binding(Kind.OTHER, element_of=values))
        else:
            self._bind_target(node.target, Binding(Kind.OTHER))
        for statement in [*node.body, *node.orelse]:
            self.visit(statement)

    visit_For = visit_AsyncFor = _loop

    def _with(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                # `with redis.Redis() as r` and `with r.pipeline() as pipe` yield the object.
                self._bind_target(
                    item.optional_vars, Binding(value=item.context_expr), item.context_expr
                )
        for statement in node.body:
            self.visit(statement)

    visit_With = visit_AsyncWith = _with

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._bind_name(node.name, Binding(Kind.OTHER))
        self.generic_visit(node)

    def _bind_target(
        self, target: ast.expr, binding: Binding, value: ast.expr | None = None
    ) -> None:
        if isinstance(target, ast.Name):
            self._bind_name(target.id, binding)
        elif isinstance(target, ast.Attribute):
            key = dotted(target)
            if key is not None:
                self._bind_attribute(key, binding)
        elif isinstance(target, ast.Tuple | ast.List):
            pairs = isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts)
            for position, element in enumerate(target.elts):
                if pairs and isinstance(value, ast.Tuple | ast.List):
                    self._bind_target(element, Binding(value=value.elts[position]))
                elif binding.kind is Kind.OTHER:
                    self._bind_target(element, binding)
                else:
                    self._bind_target(element, Binding(Kind.UNKNOWN))
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, Binding(Kind.OTHER))
        elif isinstance(target, ast.Subscript):
            # `clients[name] = redis.Redis(...)`: the collection holds clients.
            element_key = self._attribute_key(target.value)
            if element_key is not None and value is not None:
                self.bindings.elements.setdefault(element_key, []).append(value)

    def _bind_name(self, name: str, binding: Binding) -> None:
        self.bindings.scopes.setdefault(self.chain[0], {}).setdefault(name, []).append(binding)

    def _bind_attribute(self, key: str, binding: Binding) -> None:
        owner = self.bindings.owner(self.chain) if key.startswith("self.") else None
        self.bindings.attributes.setdefault((owner, key), []).append(binding)

    def _attribute_key(self, expr: ast.expr) -> AttributeKey | None:
        key = dotted(expr)
        if key is None:
            return None
        return (self.bindings.owner(self.chain) if key.startswith("self.") else None, key)
