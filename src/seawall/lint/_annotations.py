"""What a type annotation says about an object: a redis client, a pipeline, a collection
of clients, something else, or nothing (`Any`, `Optional` alone).

Pure functions of the annotation and of a `qualname` lookup (the file's imports), so
`seawall.lint._names` asks them without carrying their details.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from seawall.lint._bindings import PACKAGES, Kind

CLIENT_CLASSES = frozenset(
    {"Redis", "StrictRedis", "RedisCluster", "Valkey", "StrictValkey", "ValkeyCluster"}
)
PIPELINE_CLASSES = frozenset({"Pipeline", "ClusterPipeline"})

_VAGUE_TYPES = frozenset({"Any", "Optional", "object", "None", "Union"})
# Generic collections: `list[Redis]` is not a client, its elements are.
_COLLECTION_TYPES = frozenset(
    {
        "list",
        "List",
        "tuple",
        "Tuple",
        "set",
        "Set",
        "frozenset",
        "FrozenSet",
        "Sequence",
        "Iterable",
        "Iterator",
        "Collection",
        "dict",
        "Dict",
        "Mapping",
        "MutableMapping",
        "deque",
        "Deque",
    }
)

Qualname = Callable[[ast.expr], "str | None"]


def _last(expr: ast.expr) -> str:
    return expr.id if isinstance(expr, ast.Name) else getattr(expr, "attr", "")


def _is_none(expr: ast.expr) -> bool:
    return (isinstance(expr, ast.Constant) and expr.value is None) or _last(expr) == "None"


def _parsed(annotation: ast.expr) -> ast.expr | None:
    """The annotation, with a string one (`"Redis | None"`) parsed."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            return ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return None
    return annotation


def _unwrapped(annotation: ast.expr) -> list[ast.expr]:
    """The alternatives of `X | None`, `Optional[X]`, `Union[X, Y]`."""
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return [*_unwrapped(annotation.left), *_unwrapped(annotation.right)]
    if isinstance(annotation, ast.Subscript) and _last(annotation.value) in ("Optional", "Union"):
        inner = annotation.slice
        elements = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        return [alternative for e in elements for alternative in _unwrapped(e)]
    return [annotation]


def _element(annotation: ast.expr) -> ast.expr | None:
    """The element type of `list[Redis]`, `dict[str, Redis]` (its values), or None if
    the annotation is not a generic collection."""
    if (
        not isinstance(annotation, ast.Subscript)
        or _last(annotation.value) not in _COLLECTION_TYPES
    ):
        return None
    inner = annotation.slice
    if isinstance(inner, ast.Tuple) and inner.elts:
        return inner.elts[-1]
    return inner


def element_kind(annotation: ast.expr, qualname: Qualname) -> Kind:
    """What the elements of an annotated collection are (`list[Redis] | None`: clients)."""
    parsed = _parsed(annotation)
    if parsed is None:
        return Kind.UNKNOWN
    elements = [e for e in map(_element, _unwrapped(parsed)) if e is not None]
    return Kind.CLIENT if any(kind(e, qualname) is Kind.CLIENT for e in elements) else Kind.UNKNOWN


def _type_names(annotation: ast.expr) -> list[ast.Name | ast.Attribute]:
    """The names of types in an annotation, a dotted one whole (`typing.Any`, not also
    `typing`, which named a module, not a type, and made `_t.Any` read as a real type)."""
    found: list[ast.Name | ast.Attribute] = []
    stack = [annotation]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name | ast.Attribute):
            found.append(node)
        else:
            stack.extend(ast.iter_child_nodes(node))  # type: ignore[arg-type]
    return found


def _dotted(node: ast.Name | ast.Attribute) -> str:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name | ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return _last(node)


def kind(annotation: ast.expr, qualname: Qualname) -> Kind:
    """CLIENT or PIPELINE for a redis class (alone, optional or in a union), OTHER for any
    other type (a collection of clients included), UNKNOWN for `Any`/`Optional` alone."""
    parsed = _parsed(annotation)
    if parsed is None:
        return Kind.UNKNOWN
    alternatives = _unwrapped(parsed)
    collections = [_element(a) is not None for a in alternatives if not _is_none(a)]
    if collections and all(collections):
        return Kind.OTHER  # list[Redis], dict[str, Redis] | None
    named = [
        qualname(n) or _dotted(n)
        for a in alternatives
        if _element(a) is None
        for n in _type_names(a)
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
