"""The shape of the package: one folder per family, imports that point one way, no cycle,
every Lua script beside the family that runs it. Read from the source, no import needed."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import seawall

PACKAGE = Path(seawall.__file__).parent
# The families everything else builds on, and the integrations and tools built on them.
CORE = {"shared", "cache", "locks", "stock", "bloom"}
ABOVE_CORE = {
    "cdc",
    "sessions",
    "django",
    "sqlalchemy",
    "ops",
    "cli",
    "lint",
    "demo",
    "etcd",
    "zookeeper",
    "launcher",
    "testing",
    "aio",
    "__init__",
}
ROOT_MODULES = {"__init__.py", "aio.py", "errors.py", "testing.py", "__main__.py"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imports_of(name: str) -> set[str]:
    """The seawall modules `name` imports anywhere in its text (in functions and under
    TYPE_CHECKING too): `from a.b import c` names a.b.c when that is a module, else a.b."""
    path = MODULES[name]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in MODULES}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                if path.name != "__init__.py":
                    anchor.pop()
                base = ".".join(anchor[: len(anchor) - node.level + 1] + [base] * bool(base))
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    found.add(f"{base}.{alias.name}")
                elif base in MODULES:
                    found.add(base)
    found.discard(name)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def family(name: str) -> str:
    """seawall.cache._async.base -> cache; seawall.aio -> aio; seawall -> __init__."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def cycles() -> Iterator[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in GRAPH:
        if root in index:
            continue
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(GRAPH[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    yield sorted(component)


def test_no_module_imports_itself_back_through_another() -> None:
    assert list(cycles()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    GRAPH["seawall.shared._fanout"].add("seawall.shared._concurrency")
    try:
        assert ["seawall.shared._concurrency", "seawall.shared._fanout"] in list(cycles())
    finally:
        GRAPH["seawall.shared._fanout"].discard("seawall.shared._concurrency")


def test_core_families_never_import_what_is_built_on_them() -> None:
    upward = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if family(name) in CORE
        for target in targets
        if family(target) in ABOVE_CORE
    )
    assert upward == []


def test_shared_imports_no_family() -> None:
    found = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if family(name) == "shared"
        for target in targets
        if family(target) not in {"shared", "errors"}
    )
    assert found == []


def test_the_root_holds_the_public_faces_and_one_folder_per_family() -> None:
    modules = {path.name for path in PACKAGE.glob("*.py")}
    assert modules >= ROOT_MODULES
    assert len(modules - ROOT_MODULES) <= 6, sorted(modules - ROOT_MODULES)
    families = ("cache", "locks", "stock", "bloom", "shared", "sessions", "etcd", "zookeeper")
    for name in (*families, "django"):
        folder = PACKAGE / name
        assert (folder / "_async").is_dir() and (folder / "_sync").is_dir(), name
        docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
        assert docstring, f"{name}/__init__.py says nothing of what the family keeps right"


def script_loads() -> Iterator[tuple[str, str, str]]:
    """(module, package, script) for every `_scripts.load("seawall.x", "name")` in the source."""
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in {"load", "with_prelude"}
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "_scripts"
            ):
                texts = [arg.value for arg in node.args if isinstance(arg, ast.Constant)]
                if node.func.attr == "load":
                    yield name, texts[0], texts[1]
                else:  # a prelude comes from its script's family
                    yield name, f"seawall.{family(name)}", texts[0]


def test_every_script_sits_in_the_folder_of_the_family_that_runs_it() -> None:
    loaded = set()
    for module, package, script in script_loads():
        path = PACKAGE.parent.joinpath(*package.split("."), f"{script}.lua")
        assert path.is_file(), f"{module} loads {script}.lua from {package}: no such file"
        assert package == f"seawall.{family(module)}", f"{module} runs {package}'s {script}"
        loaded.add(path)
    assert len(loaded) > 40
    assert set(PACKAGE.rglob("*.lua")) == loaded, "a script nothing loads"
