"""Which expressions of a file are redis clients or pipelines.

Every rule asks this before it reports anything, so a dict's `.keys()` or a list's
`.get()` is never mistaken for a Redis command. The inference, in order of strength:

1. Evidence in the file. A name or attribute (`self.redis`) assigned from a client
   constructor (`redis.Redis(...)`, `redis.asyncio.Redis(...)`, `StrictRedis`, `RedisCluster`,
   `Redis.from_url(...)`, `redis.from_url(...)`, the valkey-py twins), bound by
   `with redis.Redis() as r`, annotated with a client class (`r: redis.Redis`,
   `Optional[Redis]`, `"Redis | None"`, a class-level `redis: Redis` for `self.redis`),
   assigned from another client name, or from a function of the file annotated to return a
   client, is a client; so is `sentinel.master_for(...)` (or `slave_for`). `x.pipeline()`
   of a client is a pipeline, and so is a name bound
   to one. A name bound only to something else (a literal, a loop or comprehension
   variable, an import, a non-client annotation) is not a client.
2. The name, when the file gives no evidence either way: identifiers whose words end in
   `redis` or `valkey` (`redis`, `self._redis`, `app.state.redis`, `aioredis`) or that pair
   such a word with `client`, `conn`, `connection`, `db`, `cluster`, `master`, `primary`
   or `replica` (`redis_client`, `redisConn`) are clients; so are the short names `r`,
   `rc`, `rds` (and `self.r`) in a file that imports redis or valkey.
"""

from __future__ import annotations

import ast
import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# aioredis: the package redis.asyncio grew from, same API, still imported by older code.
PACKAGES = frozenset({"redis", "valkey", "aioredis"})
CLIENT_CLASSES = frozenset(
    {"Redis", "StrictRedis", "RedisCluster", "Valkey", "StrictValkey", "ValkeyCluster"}
)
POOL_CLASSES = frozenset({"ConnectionPool", "BlockingConnectionPool"})
PIPELINE_CLASSES = frozenset({"Pipeline", "ClusterPipeline"})

_SENTINEL_CLIENTS = frozenset({"master_for", "slave_for"})
_SHORT_NAMES = frozenset({"r", "rc", "rds"})
_PACKAGE_WORDS = frozenset({"redis", "valkey", "aioredis"})
_CLIENT_WORDS = frozenset(
    {"client", "conn", "connection", "db", "cluster", "master", "primary", "replica"}
)
_VAGUE_TYPES = frozenset({"Any", "Optional", "object", "None"})
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


class Kind(enum.Enum):
    CLIENT = "client"
    PIPELINE = "pipeline"
    OTHER = "other"  # known not to be a client: a literal, a loop variable, a module
    UNKNOWN = "unknown"  # no evidence: the name decides


class Constructor(enum.Enum):
    CLIENT = "client"
    POOL = "pool"


def name_looks_like_client(identifier: str, *, short_names: bool) -> bool:
    """The naming heuristic of step 2 in the module docstring."""
    words = [w.lower() for w in _WORD.findall(identifier)]
    if not words:
        return False
    if short_names and len(words) == 1 and words[0] in _SHORT_NAMES:
        return True
    if words[-1] in _PACKAGE_WORDS:
        return True
    return any(w in _PACKAGE_WORDS for w in words) and words[-1] in _CLIENT_WORDS


def dotted(expr: ast.expr) -> str | None:
    """`self.redis` -> "self.redis"; `cls.redis` counts as `self.redis`; None if not a chain
    of attributes on a name."""
    if isinstance(expr, ast.Name):
        return "self" if expr.id == "cls" else expr.id
    if isinstance(expr, ast.Attribute):
        base = dotted(expr.value)
        return None if base is None else f"{base}.{expr.attr}"
    return None


@dataclass
class _Binding:
    kind: Kind = Kind.UNKNOWN
    value: ast.expr | None = None
    annotation: ast.expr | None = None


_Scope = ast.AST  # a Module, function, Lambda, class body or comprehension


@dataclass
class Inference:
    """Built once per file by `Inference.of(tree)`; `kind(expr)` answers per expression."""

    imports: dict[str, str] = field(default_factory=dict)  # local name -> dotted origin
    scopes: dict[_Scope, dict[str, list[_Binding]]] = field(default_factory=dict)
    attributes: dict[str, list[_Binding]] = field(default_factory=dict)
    chains: dict[ast.Name, tuple[_Scope, ...]] = field(default_factory=dict)
    returns: dict[str, list[ast.expr]] = field(default_factory=dict)  # function -> annotations
    imports_redis: bool = False
    _memo: dict[ast.expr, Kind] = field(default_factory=dict)
    _busy: set[ast.expr] = field(default_factory=set)

    @classmethod
    def of(cls, tree: ast.Module) -> Inference:
        inference = cls()
        _Collector(inference).visit(tree)
        return inference

    # -- what an expression names ------------------------------------------------------

    def qualname(self, expr: ast.expr) -> str | None:
        """The dotted origin of an imported name or attribute: `Redis` after
        `from redis.asyncio import Redis` -> "redis.asyncio.Redis"."""
        if isinstance(expr, ast.Name):
            return self.imports.get(expr.id)
        if isinstance(expr, ast.Attribute):
            base = self.qualname(expr.value)
            return None if base is None else f"{base}.{expr.attr}"
        return None

    def constructor(self, call: ast.Call) -> Constructor | None:
        """Whether `call` builds a redis client or connection pool, and which."""
        name = self.qualname(call.func)
        if name is None:
            return None
        parts = name.split(".")
        if parts[0] not in PACKAGES or len(parts) < 2:
            return None
        last, before = parts[-1], parts[-2]
        if last in CLIENT_CLASSES:
            return Constructor.CLIENT
        if last in POOL_CLASSES or (last == "from_url" and before in POOL_CLASSES):
            return Constructor.POOL
        if last == "from_url" and (
            before in CLIENT_CLASSES or before in PACKAGES or before == "asyncio"
        ):
            return Constructor.CLIENT
        if last == "from_pool" and before in CLIENT_CLASSES:
            return Constructor.CLIENT
        return None

    def annotation_kind(self, annotation: ast.expr) -> Kind:
        if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
            try:
                annotation = ast.parse(annotation.value, mode="eval").body
            except SyntaxError:
                return Kind.UNKNOWN
        named = [
            self.qualname(n) or (n.id if isinstance(n, ast.Name) else n.attr)
            for n in ast.walk(annotation)
            if isinstance(n, ast.Name | ast.Attribute)
        ]
        for qualified in named:
            parts = qualified.split(".")
            if parts[0] in PACKAGES and parts[-1] in CLIENT_CLASSES:
                return Kind.CLIENT
            if parts[0] in PACKAGES and parts[-1] in PIPELINE_CLASSES:
                return Kind.PIPELINE
        # `Any` and `Optional[...]` alone say nothing; any other type says "not a client".
        if all(q.split(".")[-1] in _VAGUE_TYPES for q in named):
            return Kind.UNKNOWN
        return Kind.OTHER

    # -- client or not ------------------------------------------------------------------

    def kind(self, expr: ast.expr) -> Kind:
        """CLIENT, PIPELINE, or OTHER (UNKNOWN is resolved by the naming heuristic)."""
        if expr in self._memo:
            return self._memo[expr]
        if expr in self._busy:  # r = r or make(): a cycle proves nothing
            return Kind.UNKNOWN
        self._busy.add(expr)
        try:
            found = self._kind(expr)
        finally:
            self._busy.discard(expr)
        self._memo[expr] = found
        return found

    def is_redis(self, expr: ast.expr) -> bool:
        return self.kind(expr) in (Kind.CLIENT, Kind.PIPELINE)

    def _kind(self, expr: ast.expr) -> Kind:
        if isinstance(expr, ast.Await):
            return self.kind(expr.value)
        if isinstance(expr, ast.NamedExpr):
            return self.kind(expr.value)
        if isinstance(expr, ast.IfExp | ast.BoolOp):
            # `pipeline if pipeline is not None else self.connection`, `pipe or r`: code
            # that queues on a pipeline when given one; judged as the pipeline, so a loop
            # over it is not reported.
            options = [expr.body, expr.orelse] if isinstance(expr, ast.IfExp) else expr.values
            kinds = [self.kind(e) for e in options]
            return Kind.PIPELINE if Kind.PIPELINE in kinds else _merge(kinds)
        if isinstance(expr, ast.Call):
            return self._call_kind(expr)
        if isinstance(expr, ast.Name):
            return self._name_kind(expr)
        if isinstance(expr, ast.Attribute):
            return self._attribute_kind(expr)
        if isinstance(expr, ast.Subscript):
            return Kind.OTHER  # rows[0]: an element of a collection, not judged by name
        return Kind.OTHER  # literals, arithmetic, comprehensions, f-strings...

    def _call_kind(self, call: ast.Call) -> Kind:
        built = self.constructor(call)
        if built is Constructor.CLIENT:
            return Kind.CLIENT
        if built is Constructor.POOL:
            return Kind.OTHER
        func = call.func
        if isinstance(func, ast.Attribute):
            receiver = self.kind(func.value)
            if func.attr == "pipeline" and receiver is Kind.CLIENT:
                return Kind.PIPELINE
            if func.attr in _SENTINEL_CLIENTS:
                return Kind.CLIENT  # Sentinel(...).master_for("name") is a client
            if receiver is Kind.PIPELINE and func.attr not in ("execute", "reset"):
                return Kind.PIPELINE  # pipeline commands return the pipeline: chains
            return Kind.UNKNOWN
        if isinstance(func, ast.Name) and func.id in self.returns:
            return _merge([self.annotation_kind(a) for a in self.returns[func.id]])
        return Kind.UNKNOWN

    def _name_kind(self, name: ast.Name) -> Kind:
        for scope in self.chains.get(name, ()):
            bindings = self.scopes.get(scope, {}).get(name.id)
            if bindings:
                found = self._bindings_kind(bindings)
                break
        else:
            found = Kind.UNKNOWN
        if found is Kind.UNKNOWN:
            return self._by_name(name.id)
        return found

    def _attribute_kind(self, attribute: ast.Attribute) -> Kind:
        qualified = self.qualname(attribute)
        if qualified is not None and qualified.split(".")[0] in PACKAGES:
            return Kind.OTHER  # redis.asyncio, redis.Redis: a module or class, not a client
        key = dotted(attribute)
        found = Kind.UNKNOWN
        if key is not None and key in self.attributes:
            found = self._bindings_kind(self.attributes[key])
        if found is Kind.UNKNOWN:
            return self._by_name(attribute.attr)
        return found

    def _bindings_kind(self, bindings: Iterable[_Binding]) -> Kind:
        kinds = []
        for binding in bindings:
            if binding.annotation is not None:
                kinds.append(self.annotation_kind(binding.annotation))
            if binding.value is not None:
                kinds.append(self.kind(binding.value))
            if binding.annotation is None and binding.value is None:
                kinds.append(binding.kind)
        return _merge(kinds)

    def _by_name(self, identifier: str) -> Kind:
        if name_looks_like_client(identifier, short_names=self.imports_redis):
            return Kind.CLIENT
        return Kind.OTHER


def _merge(kinds: Iterable[Kind]) -> Kind:
    """Any client evidence wins (then pipeline); else any contrary evidence; else unknown."""
    seen = set(kinds)
    for kind in (Kind.CLIENT, Kind.PIPELINE, Kind.OTHER):
        if kind in seen:
            return kind
    return Kind.UNKNOWN


class _Collector(ast.NodeVisitor):
    """Records imports, every binding per scope, attribute assignments, and the scope
    chain each loaded name is looked up in."""

    def __init__(self, inference: Inference) -> None:
        self.inference = inference
        self.chain: tuple[_Scope, ...] = ()

    # scopes

    def visit_Module(self, node: ast.Module) -> None:
        self.chain = (node,)
        self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        for default in [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]:
            self.visit(default)
        if not isinstance(node, ast.Lambda):
            self._bind_name(node.name, _Binding(Kind.OTHER))
            for decorator in node.decorator_list:
                self.visit(decorator)
            if node.returns is not None:
                self.inference.returns.setdefault(node.name, []).append(node.returns)
        outer = self.chain
        # Methods do not see their class body's names (Python's scoping rule).
        self.chain = (node, *(s for s in outer if not isinstance(s, ast.ClassDef)))
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                self._bind_name(arg.arg, _Binding(Kind.UNKNOWN, annotation=arg.annotation))
        body = node.body if isinstance(node.body, list) else [node.body]
        for statement in body:
            self.visit(statement)
        self.chain = outer

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._bind_name(node.name, _Binding(Kind.OTHER))
        for expr in [*node.bases, *node.decorator_list]:
            self.visit(expr)
        outer = self.chain
        self.chain = (node, *outer)
        for statement in node.body:
            # A class-level `redis: Redis` or `redis = Redis()` types `self.redis`.
            if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                self._bind_attribute(
                    f"self.{statement.target.id}",
                    _Binding(annotation=statement.annotation, value=statement.value),
                )
            elif isinstance(statement, ast.Assign):
                for target in statement.targets:
                    if isinstance(target, ast.Name):
                        self._bind_attribute(f"self.{target.id}", _Binding(value=statement.value))
            self.visit(statement)
        self.chain = outer

    def _comprehension(
        self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp
    ) -> None:
        outer = self.chain
        self.visit(node.generators[0].iter)  # evaluated in the enclosing scope
        self.chain = (node, *outer)
        for position, generator in enumerate(node.generators):
            if position:
                self.visit(generator.iter)
            self._bind_target(generator.target, _Binding(Kind.OTHER))
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
        self.inference.chains[node] = self.chain

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            top = alias.name.split(".")[0]
            local = alias.asname or top
            origin = alias.name if alias.asname else top
            self.inference.imports[local] = origin
            self.inference.imports_redis |= top in PACKAGES
            self._bind_name(local, _Binding(Kind.OTHER if top in PACKAGES else Kind.UNKNOWN))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        from_redis = node.level == 0 and module.split(".")[0] in PACKAGES
        self.inference.imports_redis |= from_redis
        for alias in node.names:
            local = alias.asname or alias.name
            if node.level == 0:
                self.inference.imports[local] = f"{module}.{alias.name}"
            self._bind_name(local, _Binding(Kind.OTHER if from_redis else Kind.UNKNOWN))

    # bindings

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self._bind_target(target, _Binding(value=node.value), node.value)
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self._bind_target(node.target, _Binding(annotation=node.annotation, value=node.value))
        self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        self._bind_target(node.target, _Binding(Kind.UNKNOWN))
        self.visit(node.target)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind_target(node.target, _Binding(value=node.value))

    def _loop(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._bind_target(node.target, _Binding(Kind.OTHER))
        for statement in [*node.body, *node.orelse]:
            self.visit(statement)

    visit_For = visit_AsyncFor = _loop

    def _with(self, node: ast.With | ast.AsyncWith) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                # `with redis.Redis() as r` and `with r.pipeline() as pipe` yield the object.
                self._bind_target(
                    item.optional_vars, _Binding(value=item.context_expr), item.context_expr
                )
        for statement in node.body:
            self.visit(statement)

    visit_With = visit_AsyncWith = _with

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._bind_name(node.name, _Binding(Kind.OTHER))
        self.generic_visit(node)

    def _bind_target(
        self, target: ast.expr, binding: _Binding, value: ast.expr | None = None
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
                    self._bind_target(element, _Binding(value=value.elts[position]))
                elif binding.kind is Kind.OTHER:
                    self._bind_target(element, binding)
                else:
                    self._bind_target(element, _Binding(Kind.UNKNOWN))
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, _Binding(Kind.OTHER))

    def _bind_name(self, name: str, binding: _Binding) -> None:
        self.inference.scopes.setdefault(self.chain[0], {}).setdefault(name, []).append(binding)

    def _bind_attribute(self, key: str, binding: _Binding) -> None:
        self.inference.attributes.setdefault(key, []).append(binding)
