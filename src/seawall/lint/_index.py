"""The first pass over a project: which of its names hold a redis client.

A client is usually built in one module (`app/redis.py`: `client = redis.Redis(...)`, a
`def get_client() -> Redis` factory, a `class Connection(redis.Redis)`, a base class whose
`__init__` sets `self.redis`) and used in others under neutral names (`conn`, `db`,
`self.backend`). Checking one file at a time cannot see that, so `lint_paths` first reads
every file that mentions redis or valkey and records, per module, what it exports:

- module-level names holding a client, and names that are another module's name or the
  result of another module's function (resolved later, through any number of modules);
- functions and methods that return a client (annotated `-> Redis`, or returning one);
- classes that derive from a client class, their bases in other modules, and the
  attributes of `self` that hold a client, per class.

`seawall.lint._facts` reads a module's facts off its inference. The second pass checks
each file with its own inference, which asks the index about
every name it imports from the project. Facts are small (names, not trees), so the first
pass keeps no syntax tree in memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


@dataclass
class ModuleFacts:
    """What one module exports, in its own names ("client", "get_client", "Store",
    "Store.connect")."""

    clients: set[str] = field(default_factory=set)
    # name -> the qualified name it is bound to (an import, `client = other.client`)
    aliases: dict[str, str] = field(default_factory=dict)
    # name -> qualified names of the functions whose result it holds (`c = make()`)
    results: dict[str, list[str]] = field(default_factory=dict)
    factories: set[str] = field(default_factory=set)  # functions and methods
    factory_results: dict[str, list[str]] = field(default_factory=dict)  # return other(...)
    client_classes: set[str] = field(default_factory=set)
    bases: dict[str, list[str]] = field(default_factory=dict)  # class -> qualified bases
    attributes: dict[str, set[str]] = field(default_factory=dict)  # class -> {"self.redis"}
    annotated_methods: set[str] = field(default_factory=set)  # method names `-> Redis`
    # (callee, position, keyword): a call here passes a client to a class of the project
    # (`Cache(self)`), its callee qualified as the calling module imports it.
    client_arguments: set[tuple[str, int | None, str | None]] = field(default_factory=set)
    # Methods that set a key only if it is absent and never give it an expiry (a
    # storage's `put_if_empty`): a lock class of another module may take its lock so.
    unexpiring_setters: set[str] = field(default_factory=set)


def module_name(path: str, cache: dict[str, str] | None = None) -> tuple[str, str]:
    """(module, package) of a file from the `__init__.py` files above it:
    `src/app/store.py` in package `app` -> ("app.store", "app")."""
    directory, filename = os.path.split(os.path.abspath(path))
    stem = filename[:-3] if filename.endswith(".py") else filename
    prefix = _package_of(directory, {} if cache is None else cache)
    if stem == "__init__":
        return prefix, prefix
    return (f"{prefix}.{stem}" if prefix else stem), prefix


def _package_of(directory: str, cache: dict[str, str]) -> str:
    if directory in cache:
        return cache[directory]
    if os.path.isfile(os.path.join(directory, "__init__.py")):
        parent, name = os.path.split(directory)
        outer = _package_of(parent, cache) if parent != directory else ""
        found = f"{outer}.{name}" if outer else name
    else:
        found = ""
    cache[directory] = found
    return found


@dataclass
class ProjectIndex:
    """Facts per module, and the questions the second pass asks about qualified names."""

    modules: dict[str, ModuleFacts] = field(default_factory=dict)
    _annotated_methods: set[str] = field(default_factory=set)
    _unexpiring_setters: set[str] = field(default_factory=set)
    _busy: set[tuple[str, str]] = field(default_factory=set)
    _arguments: set[tuple[str, int | None, str | None]] | None = None

    def add(self, module: str, facts: ModuleFacts) -> None:
        self.modules[module] = facts
        self._annotated_methods |= facts.annotated_methods
        self._unexpiring_setters |= facts.unexpiring_setters
        self._arguments = None

    def client_argument(self, class_qualname: str, position: int | None, name: str | None) -> bool:
        """Whether some module passes a client to this class's `__init__` parameter."""
        if self._arguments is None:
            self._arguments = {
                (self._defined_at(callee), at, keyword)
                for facts in self.modules.values()
                for callee, at, keyword in facts.client_arguments
            }
        return (position is not None and (class_qualname, position, None) in self._arguments) or (
            name is not None and (class_qualname, None, name) in self._arguments
        )

    def _defined_at(self, qualname: str) -> str:
        """Follow re-exports (`from .cache import Cache` in a package's __init__) to the
        module that defines the name."""
        for _ in range(5):
            found = self._split(qualname)
            if found is None or found[1] not in found[0].aliases:
                return qualname
            qualname = found[0].aliases[found[1]]
        return qualname

    def _split(self, qualname: str) -> tuple[ModuleFacts, str] | None:
        """("app.store", "Store.connect") for "app.store.Store.connect"."""
        parts = qualname.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            facts = self.modules.get(".".join(parts[:cut]))
            if facts is not None:
                return facts, ".".join(parts[cut:])
        return None

    def _guarded(self, question: str, qualname: str) -> bool:
        """Whether a question is already being answered up the stack (an import cycle)."""
        if (question, qualname) in self._busy:
            return True
        self._busy.add((question, qualname))
        return False

    def is_client(self, qualname: str) -> bool:
        """A module-level name (or re-export) that holds a client."""
        found = self._split(qualname)
        if found is None or self._guarded("name", qualname):
            return False
        try:
            facts, name = found
            module = qualname[: -len(name) - 1]
            if name in facts.clients:
                return True
            if name in facts.aliases:
                return self.is_client(facts.aliases[name])
            return any(
                self.returns_client(self._qualify(module, callee))
                for callee in facts.results.get(name, ())
            )
        finally:
            self._busy.discard(("name", qualname))

    def returns_client(self, qualname: str) -> bool:
        """A function (`app.store.get_client`) or method (`app.store.Store.connect`)
        whose result is a client; also a class that derives from a client class."""
        found = self._split(qualname)
        if found is None or self._guarded("returns", qualname):
            return False
        try:
            facts, name = found
            module = qualname[: -len(name) - 1]
            if name in facts.factories or self.is_client_class(qualname):
                return True
            if name in facts.aliases:
                return self.returns_client(facts.aliases[name])
            return any(
                self.returns_client(self._qualify(module, callee))
                for callee in facts.factory_results.get(name, ())
            )
        finally:
            self._busy.discard(("returns", qualname))

    def is_client_class(self, qualname: str) -> bool:
        found = self._split(qualname)
        if found is None or self._guarded("class", qualname):
            return False
        try:
            facts, name = found
            if name in facts.client_classes:
                return True
            if name in facts.aliases:
                return self.is_client_class(facts.aliases[name])
            return any(self.is_client_class(base) for base in facts.bases.get(name, ()))
        finally:
            self._busy.discard(("class", qualname))

    def attribute_is_client(self, class_qualname: str, key: str) -> bool:
        """Whether a class (or one of its bases, across modules) sets `key` ("self.redis")
        to a client."""
        found = self._split(class_qualname)
        if found is None or self._guarded("attribute", f"{class_qualname}:{key}"):
            return False
        try:
            facts, name = found
            if name in facts.aliases:
                return self.attribute_is_client(facts.aliases[name], key)
            if key in facts.attributes.get(name, ()):
                return True
            return any(self.attribute_is_client(b, key) for b in facts.bases.get(name, ()))
        finally:
            self._busy.discard(("attribute", f"{class_qualname}:{key}"))

    def sets_without_expiry(self, method: str) -> bool:
        """A method of this name somewhere in the project sets a key only if absent, with
        no expiry (SETNX, or SET NX without EX/PX, and no EXPIRE in the method)."""
        return method in self._unexpiring_setters

    def method_returns_client(self, method: str) -> bool:
        """A method of this name somewhere in the project is annotated `-> Redis`."""
        return method in self._annotated_methods

    @staticmethod
    def _qualify(module: str, callee: str) -> str:
        """A callee recorded by its bare name is a function of the same module."""
        return callee if "." in callee else f"{module}.{callee}"
