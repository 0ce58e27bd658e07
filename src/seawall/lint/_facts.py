"""Read what one module exports off its own inference: the first pass's per-file step
(`seawall.lint._index` holds the facts and answers the second pass's questions)."""

from __future__ import annotations

import ast

from seawall.lint._bindings import PACKAGES, Kind
from seawall.lint._index import ModuleFacts
from seawall.lint._names import Inference

_Function = ast.FunctionDef | ast.AsyncFunctionDef


def facts_of(inference: Inference, tree: ast.Module) -> ModuleFacts:
    """Read one module's exports off its own inference (run without an index)."""
    facts = ModuleFacts()
    for name, bindings in inference.scopes.get(tree, {}).items():
        if inference.bindings_kind(bindings) is Kind.CLIENT:
            facts.clients.add(name)
            continue
        for binding in bindings:
            if binding.origin is not None:
                facts.aliases[name] = binding.origin
            elif isinstance(binding.value, ast.Call):
                callee = inference.qualname(binding.value.func)
                if callee is not None:
                    facts.results.setdefault(name, []).append(callee)
                elif isinstance(binding.value.func, ast.Name):
                    facts.results.setdefault(name, []).append(binding.value.func.id)
            elif binding.value is not None:
                target = inference.qualname(binding.value)
                if target is not None:
                    facts.aliases[name] = target
    _client_arguments(inference, facts)
    for statement in tree.body:
        if isinstance(statement, _Function):
            _function_facts(inference, statement, statement.name, facts)
        elif isinstance(statement, ast.ClassDef):
            _class_facts(inference, statement, facts)
    return facts


_EXPIRES = frozenset({"expire", "pexpire", "expireat", "pexpireat", "getset"})
_EXPIRY_KEYWORDS = frozenset({"ex", "px", "exat", "pxat", "keepttl"})


def _sets_without_expiry(inference: Inference, function: _Function) -> bool:
    """SETNX (or set(..., nx=True) without an expiry) on a client, and no EXPIRE or
    GETSET anywhere in the function."""
    found = False
    for node in ast.walk(function):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr in _EXPIRES:
            return False
        keywords = {k.arg for k in node.keywords}
        if node.func.attr == "setnx" or (
            node.func.attr == "set" and "nx" in keywords and not keywords & _EXPIRY_KEYWORDS
        ):
            found = found or inference.kind(node.func.value) is Kind.CLIENT
    return found


def _function_facts(
    inference: Inference,
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    name: str,
    facts: ModuleFacts,
) -> None:
    if "." in name and _sets_without_expiry(inference, function):
        facts.unexpiring_setters.add(function.name)
    kind = inference.function_returns_kind(function)
    if kind is Kind.CLIENT:
        facts.factories.add(name)
        if function.returns is not None and "." in name:
            facts.annotated_methods.add(function.name)
        return
    for value in inference.returned_by.get(function, ()):
        if isinstance(value, ast.Call):
            func = value.func
            callee = inference.qualname(func) or (func.id if isinstance(func, ast.Name) else None)
            if callee is not None:
                facts.factory_results.setdefault(name, []).append(callee)


def _class_facts(inference: Inference, cls: ast.ClassDef, facts: ModuleFacts) -> None:
    if inference.subclasses_client(cls.name):
        facts.client_classes.add(cls.name)
    facts.bases[cls.name] = [q for q in map(inference.qualname, cls.bases) if q is not None]
    held = {
        key
        for (owner, key), bindings in inference.attributes.items()
        if owner is cls and inference.bindings_kind(bindings) is Kind.CLIENT
    }
    if held:
        facts.attributes[cls.name] = held
    for statement in cls.body:
        if isinstance(statement, _Function):
            _function_facts(inference, statement, f"{cls.name}.{statement.name}", facts)
            if statement.name == "__init__":
                _super_init_arguments(inference, cls, statement, facts)


def _super_init_arguments(
    inference: Inference, cls: ast.ClassDef, init: _Function, facts: ModuleFacts
) -> None:
    """`super().__init__(client, ...)` in a subclass's `__init__` passes a client to its
    base's `__init__` (a `RedisCache(BaseRedisCache)` that builds the client and hands it
    to the base class, which keeps it as `self._write_client`)."""
    bases = [
        inference.qualname(base)
        or (f"{inference.module}.{base.id}" if isinstance(base, ast.Name) else None)
        for base in cls.bases
    ]
    if not bases or bases[0] is None or bases[0].split(".")[0] in PACKAGES:
        return
    for node in ast.walk(init):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "__init__"
            and isinstance(node.func.value, ast.Call)
            and isinstance(node.func.value.func, ast.Name)
            and node.func.value.func.id == "super"
        ):
            continue
        for position, argument in enumerate(node.args):
            if isinstance(argument, ast.Starred):
                break
            if inference.kind(argument) is Kind.CLIENT:
                facts.client_arguments.add((bases[0], position, None))
        for keyword in node.keywords:
            if keyword.arg is not None and inference.kind(keyword.value) is Kind.CLIENT:
                facts.client_arguments.add((bases[0], None, keyword.arg))


def _client_arguments(inference: Inference, facts: ModuleFacts) -> None:
    """Calls of the project's classes that pass a client: `Cache(self)` in a method of a
    Redis subclass, `Store(redis.Redis(...))`."""
    for name, sites in inference.call_sites.items():
        for site in sites:
            callee = inference.qualname(site.func)
            if callee is None and isinstance(site.func, ast.Name) and name in inference.classes:
                callee = f"{inference.module}.{name}"
            if callee is None or callee.split(".")[0] in PACKAGES:
                continue
            for position, argument in enumerate(site.args):
                if isinstance(argument, ast.Starred):
                    break
                if inference.kind(argument) is Kind.CLIENT:
                    facts.client_arguments.add((callee, position, None))
            for keyword in site.keywords:
                if keyword.arg is not None and inference.kind(keyword.value) is Kind.CLIENT:
                    facts.client_arguments.add((callee, None, keyword.arg))
