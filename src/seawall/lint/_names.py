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
   of a client is a pipeline, and so is a name bound to one. A name bound only to
   something else (a literal, a loop or comprehension variable, an import, a non-client
   annotation) is not a client. (Where names are bound: `seawall.lint._bindings`.)
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
from typing import TYPE_CHECKING

from seawall.lint import _annotations
from seawall.lint._annotations import CLIENT_CLASSES
from seawall.lint._bindings import (
    PACKAGES,
    AttributeKey,
    Binding,
    Bindings,
    Collector,
    Kind,
    dotted,
    from_settings,
)

if TYPE_CHECKING:
    from seawall.lint._index import ProjectIndex

POOL_CLASSES = frozenset({"ConnectionPool", "BlockingConnectionPool"})

# Methods that give a client: a Sentinel's, and a cluster client's per node.
_SENTINEL_CLIENTS = frozenset({"master_for", "slave_for", "get_redis_connection"})
# Client classes named so that no other library's class is likely to share the name,
# recognised at the end of any attribute chain (`self.dependency.cluster.RedisCluster`,
# the redis module kept on an attribute and imported lazily).
_DISTINCT_CLIENT_CLASSES = frozenset({"RedisCluster", "StrictRedis", "ValkeyCluster"})
_SHORT_NAMES = frozenset({"r", "rc", "rds"})
_PACKAGE_WORDS = frozenset({"redis", "valkey", "aioredis"})
_CLIENT_WORDS = frozenset(
    {"client", "conn", "connection", "db", "cluster", "master", "primary", "replica"}
)
# Functions of other libraries documented to return a redis client.
CLIENT_FACTORIES = frozenset({"django_redis.get_redis_connection"})
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")


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


@dataclass
class Inference(Bindings):
    """Built once per file by `Inference.of(tree)`; `kind(expr)` answers per expression."""

    # The project's first pass (`seawall.lint._index`): what other modules export.
    index: ProjectIndex | None = None
    _memo: dict[ast.expr, Kind] = field(default_factory=dict)
    _busy: set[ast.expr] = field(default_factory=set)
    _elements_busy: set[ast.expr] = field(default_factory=set)
    _qualnames: dict[ast.expr, str | None] = field(default_factory=dict)
    _ducks: dict[str, set[object]] | None = None
    _client_classes: dict[str, bool] = field(default_factory=dict)

    def use_index(self, index: ProjectIndex) -> None:
        """Attach the project's index to an inference built in the first pass; what was
        judged without it is judged again."""
        self.index = index
        self._memo.clear()
        self._client_classes.clear()
        self._qualnames.clear()

    @classmethod
    def of(
        cls,
        tree: ast.Module,
        index: ProjectIndex | None = None,
        module: str | None = None,
        package: str | None = None,
    ) -> Inference:
        inference = cls(index=index, module=module, package=package)
        Collector(inference).visit(tree)
        return inference

    # -- what an expression names ------------------------------------------------------

    def qualname(self, expr: ast.expr, depth: int = 0) -> str | None:
        """The dotted origin of an imported name or attribute: `Redis` after
        `from redis.asyncio import Redis` -> "redis.asyncio.Redis"; also through a name
        or attribute bound once to one (`self._lib = redis` ... `self._lib.Redis`,
        `self._client_class = redis.Redis`)."""
        if depth == 0 and expr in self._qualnames:
            return self._qualnames[expr]
        found: str | None = None
        if isinstance(expr, ast.Name):
            found = self.imports.get(expr.id)
        elif isinstance(expr, ast.Attribute):
            base = self.qualname(expr.value, depth)
            found = None if base is None else f"{base}.{expr.attr}"
        else:
            return None
        if found is None and depth < 3:
            found = self._bound_qualname(expr, depth)
        if depth == 0:
            self._qualnames[expr] = found
        return found

    def _bound_qualname(self, expr: ast.Name | ast.Attribute, depth: int) -> str | None:
        if isinstance(expr, ast.Name) and expr.id in ("self", "cls"):
            return None
        values = [
            b.value
            for b in self.bindings_of(expr)
            if b.value is not None
            and not (isinstance(b.value, ast.Constant) and b.value.value is None)
        ]
        if len(values) != 1 or not isinstance(values[0], ast.Name | ast.Attribute):
            return None
        return self.qualname(values[0], depth + 1)

    def constructor(self, call: ast.Call) -> Constructor | None:
        """Whether `call` builds a redis client or connection pool, and which."""
        name = self.qualname(call.func)
        if name is None:
            func = call.func
            if isinstance(func, ast.Attribute) and func.attr in _DISTINCT_CLIENT_CLASSES:
                return Constructor.CLIENT
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

    def element_annotation_kind(self, annotation: ast.expr) -> Kind:
        """What the elements of an annotated collection are (`list[Redis]`: clients)."""
        return _annotations.element_kind(annotation, self.qualname)

    def annotation_kind(self, annotation: ast.expr) -> Kind:
        return _annotations.kind(annotation, self.qualname)

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
            # rows[0]: an element of a collection, a client only if the collection
            # holds clients (`self.shards[name]`), never judged by name.
            return Kind.CLIENT if self.element_kind(expr.value) is Kind.CLIENT else Kind.OTHER
        return Kind.OTHER  # literals, arithmetic, comprehensions, f-strings...

    def _call_kind(self, call: ast.Call) -> Kind:
        built = self.constructor(call)
        if built is Constructor.CLIENT:
            return Kind.CLIENT
        if built is Constructor.POOL:
            return Kind.OTHER
        func = call.func
        callee = self.qualname(func)
        if callee in CLIENT_FACTORIES:
            return Kind.CLIENT
        if callee is not None and self.index is not None and self.index.returns_client(callee):
            return Kind.CLIENT  # a factory, or a client subclass, of another module
        if isinstance(func, ast.Name) and self.subclasses_client(func.id):
            return Kind.CLIENT  # MyRedis(...) of `class MyRedis(redis.Redis)`
        if isinstance(func, ast.Attribute):
            receiver = self.kind(func.value)
            if func.attr in ("pipeline", "bitfield", "bitfield_ro"):
                # Whatever the receiver (`queue.connection`, typed by a class of another
                # module, is not known to be a client): what `.pipeline()` gives queues
                # commands, and a method only redis has called on it later
                # (`pipeline.srem`) must not make it a client whose commands in a loop
                # are round trips. A BITFIELD builder queues its operations the same way.
                return Kind.PIPELINE
            if func.attr in _SENTINEL_CLIENTS:
                return Kind.CLIENT  # Sentinel(...).master_for("name") is a client
            if receiver is Kind.PIPELINE and func.attr not in ("execute", "reset"):
                return Kind.PIPELINE  # pipeline commands return the pipeline: chains
            if receiver is Kind.CLIENT:
                return Kind.UNKNOWN  # a command's reply
            found = self._returns_kind(func.attr)
            if (
                found is Kind.UNKNOWN
                and self.index is not None
                and self.index.method_returns_client(func.attr)
            ):
                return Kind.CLIENT  # a method annotated `-> Redis` in another module
            return found
        if isinstance(func, ast.Name):
            return self._returns_kind(func.id)
        return Kind.UNKNOWN

    def _returns_kind(self, function: str) -> Kind:
        """What calling a function (or method) of this name returns: its annotation
        (`-> Redis`), or else what its `return` statements return (a factory)."""
        if function in self.returns:
            return _merge([self.annotation_kind(a) for a in self.returns[function]])
        values = self.returned.get(function, [])
        if values and self._merge_values(values) is Kind.CLIENT:
            return Kind.CLIENT
        return Kind.UNKNOWN

    def function_returns_kind(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> Kind:
        """What one function returns: its annotation, or else its `return` statements."""
        if function.returns is not None:
            return self.annotation_kind(function.returns)
        values = [
            n.value for n in ast.walk(function) if isinstance(n, ast.Return) and n.value is not None
        ]
        return Kind.CLIENT if values and self._merge_values(values) is Kind.CLIENT else Kind.UNKNOWN

    def _merge_values(self, values: Iterable[ast.expr]) -> Kind:
        return _merge(
            self.kind(v) for v in values if not (isinstance(v, ast.Constant) and v.value is None)
        )

    def element_kind(self, collection: ast.expr) -> Kind:
        """CLIENT if `collection` holds redis clients (a literal or comprehension of
        clients, a name bound to one, `x.append(client)`, `x[k] = client`, `list[Redis]`)."""
        if collection in self._elements_busy:
            return Kind.UNKNOWN
        self._elements_busy.add(collection)
        try:
            return self._element_kind(collection)
        finally:
            self._elements_busy.discard(collection)

    def _element_kind(self, collection: ast.expr) -> Kind:
        if isinstance(collection, ast.List | ast.Tuple | ast.Set):
            return _merge(self.kind(e) for e in collection.elts if not isinstance(e, ast.Starred))
        if isinstance(collection, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            return self.kind(collection.elt)
        if isinstance(collection, ast.Dict):
            return _merge(self.kind(v) for v in collection.values)
        if isinstance(collection, ast.DictComp):
            return self.kind(collection.value)
        if isinstance(collection, ast.Call):
            func = collection.func
            if isinstance(func, ast.Attribute) and func.attr == "values":
                return self.element_kind(func.value)
            if isinstance(func, ast.Name) and func.id in ("list", "tuple", "sorted", "set"):
                return self.element_kind(collection.args[0]) if collection.args else Kind.UNKNOWN
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in self.returns:
                return _merge(self.element_annotation_kind(a) for a in self.returns[name])
            return Kind.UNKNOWN
        kinds: list[Kind] = []
        bindings: list[Binding] = []
        key: AttributeKey
        if isinstance(collection, ast.Name):
            bindings = self._name_bindings(collection)
            key = (None, collection.id)
        elif isinstance(collection, ast.Attribute):
            found = self._attribute_bindings(collection)
            bindings, key = found if found is not None else ([], (None, ""))
        else:
            return Kind.UNKNOWN
        for binding in bindings:
            if binding.annotation is not None:
                kinds.append(self.element_annotation_kind(binding.annotation))
            if binding.value is not None:
                kinds.append(self.element_kind(binding.value))
        kinds.extend(self.kind(v) for v in self.elements.get(key, ()))
        return Kind.CLIENT if Kind.CLIENT in kinds else Kind.UNKNOWN

    def subclasses_client(self, class_name: str) -> bool:
        """Whether a class of this file named so derives from a redis client class
        (directly, or through other classes of the file)."""
        if class_name in self._client_classes:
            return self._client_classes[class_name]
        self._client_classes[class_name] = False  # a cycle of bases proves nothing
        found = any(
            self._is_client_class(b) for c in self.classes.get(class_name, ()) for b in c.bases
        )
        self._client_classes[class_name] = found
        return found

    def _is_client_class(self, base: ast.expr, depth: int = 0) -> bool:
        if isinstance(base, ast.Subscript):  # Redis[bytes]: the generic class itself
            base = base.value
        qualified = self.qualname(base)
        if qualified is not None:
            parts = qualified.split(".")
            if parts[0] in PACKAGES:
                return parts[-1] in CLIENT_CLASSES
            return self.index is not None and self.index.is_client_class(qualified)
        if not isinstance(base, ast.Name):
            return False
        # An alias of a client class, bound differently for type checkers and at run time
        # (`BaseRedis = Redis[bytes]` under TYPE_CHECKING, else `BaseRedis = Redis`).
        aliases = [b.value for b in self._name_bindings(base) if b.value is not None]
        if depth < 3 and any(
            isinstance(v, ast.Name | ast.Attribute | ast.Subscript)
            and self._is_client_class(v, depth + 1)
            for v in aliases
        ):
            return True
        return self.subclasses_client(base.id)

    def bindings_of(self, expr: ast.expr) -> list[Binding]:
        """Where a name or attribute chain is bound in the file (empty for anything else)."""
        if isinstance(expr, ast.Name):
            return self._name_bindings(expr)
        if isinstance(expr, ast.Attribute):
            found = self._attribute_bindings(expr)
            return found[0] if found is not None else []
        return []

    def _name_bindings(self, name: ast.Name) -> list[Binding]:
        for scope in self.chains.get(name, ()):
            bindings = self.scopes.get(scope, {}).get(name.id)
            if bindings:
                return bindings
        return []

    def _name_kind(self, name: ast.Name) -> Kind:
        if name.id == "self":
            owner = self.owner(self.chains.get(name, ()))
            if owner is not None and self.subclasses_client(owner.name):
                return Kind.CLIENT  # self inside `class MyRedis(redis.Redis)`
        found = self.bindings_kind(self._name_bindings(name))
        if found in (Kind.CLIENT, Kind.PIPELINE):
            return found
        if self.imports_redis and self._binding_scope(name) in self._duck_scopes().get(name.id, ()):
            return Kind.CLIENT  # `conn.hgetall(k)` somewhere in the scope that binds conn
        if found is Kind.UNKNOWN:
            return self._by_name(name.id)
        return found

    def _attribute_bindings(
        self, attribute: ast.Attribute
    ) -> tuple[list[Binding], AttributeKey] | None:
        """The bindings of `self.x` in the class of the method it is read in (or one of its
        base classes in the file), or of another attribute chain anywhere in the file."""
        key = dotted(attribute)
        if key is None:
            return None
        if not key.startswith("self."):
            return self.attributes.get((None, key), []), (None, key)
        root: ast.expr = attribute
        while isinstance(root, ast.Attribute):
            root = root.value
        chain = self.chains.get(root, ()) if isinstance(root, ast.Name) else ()
        owner = self.owner(chain)
        seen: set[str] = set()
        pending = [owner]
        while pending:
            cls = pending.pop()
            if (cls, key) in self.attributes or cls is None:
                return self.attributes.get((cls, key), []), (cls, key)
            seen.add(cls.name)
            for base in cls.bases:
                if isinstance(base, ast.Name) and base.id not in seen:
                    pending.extend(self.classes.get(base.id, ()))
        return [], (owner, key)

    def _attribute_kind(self, attribute: ast.Attribute) -> Kind:
        qualified = self.qualname(attribute)
        if qualified is not None and qualified.split(".")[0] in PACKAGES:
            return Kind.OTHER  # redis.asyncio, redis.Redis: a module or class, not a client
        if qualified is not None and from_settings(qualified):
            return Kind.OTHER  # settings.REDIS: configuration, not a client
        if qualified is not None and self.index is not None and self.index.is_client(qualified):
            return Kind.CLIENT  # store.client after `from app import store`
        found = self._attribute_bindings(attribute)
        kind = Kind.UNKNOWN if found is None else self.bindings_kind(found[0])
        if kind in (Kind.CLIENT, Kind.PIPELINE):
            return kind
        if found is not None and self._duck_typed(found[1]):
            return Kind.CLIENT  # `self.connection.zadd(...)` somewhere in the class
        if kind is Kind.UNKNOWN and found is not None and self._inherited_client(found[1]):
            return Kind.CLIENT
        if kind is Kind.UNKNOWN:
            return self._by_name(attribute.attr)
        return kind

    def _duck_typed(self, key: AttributeKey) -> bool:
        """In a file that imports redis, an object that receives a command only redis
        clients have (`self.connection.zadd(...)`, `conn.hgetall(k)`): no other object
        answers to those names, so this outweighs a neutral name or a parameter."""
        return self.imports_redis and key in self.duck_clients

    def _binding_scope(self, name: ast.Name) -> object:
        """The scope whose bindings a loaded name refers to (None if unbound)."""
        for scope in self.chains.get(name, ()):
            if self.scopes.get(scope, {}).get(name.id):
                return scope
        return None

    def _duck_scopes(self) -> dict[str, set[object]]:
        if self._ducks is None:
            self._ducks = {}
            for name in self.duck_names:
                self._ducks.setdefault(name.id, set()).add(self._binding_scope(name))
        return self._ducks

    def _inherited_client(self, key: AttributeKey) -> bool:
        """`self.redis` set to a client by a base class defined in another module."""
        owner, name = key
        if owner is None or self.index is None:
            return False
        index = self.index
        return any(
            index.attribute_is_client(qualified, name)
            for qualified in map(self.qualname, owner.bases)
            if qualified is not None
        )

    def bindings_kind(self, bindings: Iterable[Binding]) -> Kind:
        kinds = []
        for binding in bindings:
            if binding.annotation is not None:
                kinds.append(self.annotation_kind(binding.annotation))
            if (
                binding.origin is not None
                and self.index is not None
                and self.index.is_client(binding.origin)
            ):
                kinds.append(Kind.CLIENT)
            if (
                binding.init_of is not None
                # No annotation, or one that says nothing (`client: Any`)
                and (
                    binding.annotation is None
                    or self.annotation_kind(binding.annotation) is Kind.UNKNOWN
                )
                and self._passed_a_client(binding)
            ):
                kinds.append(Kind.CLIENT)
            if binding.element_of is not None:
                element = self.element_kind(binding.element_of)
                kinds.append(element if element is Kind.CLIENT else binding.kind)
            elif binding.value is not None:
                # `x = None` (or an initialiser of None) says nothing about what x will hold.
                if not (isinstance(binding.value, ast.Constant) and binding.value.value is None):
                    kinds.append(self.kind(binding.value))
            elif binding.annotation is None:
                kinds.append(binding.kind)
        return _merge(kinds)

    def _passed_a_client(self, binding: Binding) -> bool:
        """Whether a caller of the class passes a client for this `__init__` parameter:
        `Cache(self)` in a method of `class Database(redis.Redis)`, in this file or (from
        the index) in another module of the project."""
        cls = binding.init_of
        assert cls is not None
        for site in self.call_sites.get(cls.name, ()):
            if isinstance(site.func, ast.Name) and site.func.id in self.imports:
                continue  # another module's class of the same name
            argument = passed(site, binding.position, binding.parameter)
            if argument is not None and self.kind(argument) is Kind.CLIENT:
                return True
        if self.index is None or self.module is None:
            return False
        return self.index.client_argument(
            f"{self.module}.{cls.name}", binding.position, binding.parameter
        )

    def _by_name(self, identifier: str) -> Kind:
        if name_looks_like_client(identifier, short_names=self.imports_redis):
            return Kind.CLIENT
        return Kind.OTHER


def passed(call: ast.Call, position: int | None, keyword: str | None) -> ast.expr | None:
    """The argument a call passes for a parameter (by position, or by keyword)."""
    if position is not None:
        for index, argument in enumerate(call.args):
            if isinstance(argument, ast.Starred):
                return None
            if index == position:
                return argument
    return next((k.value for k in call.keywords if k.arg is not None and k.arg == keyword), None)


def _merge(kinds: Iterable[Kind]) -> Kind:
    """Any client evidence wins (then pipeline); else any contrary evidence; else unknown."""
    seen = set(kinds)
    for kind in (Kind.CLIENT, Kind.PIPELINE, Kind.OTHER):
        if kind in seen:
            return kind
    return Kind.UNKNOWN
