"""Find the files, check each one, and keep going past the ones that are not Python."""

from __future__ import annotations

import ast
import contextlib
import gc
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from seawall.lint._context import FileContext
from seawall.lint._index import ProjectIndex, facts_of, module_name
from seawall.lint._model import Finding, Rule
from seawall.lint._names import Inference
from seawall.lint._noqa import silenced, suppressions
from seawall.lint.rules import RULES

# Directories never walked into: environments, VCS data and caches hold code that is not
# the project's (or is not code at all).
SKIPPED_DIRS = frozenset(
    {
        ".venv",
        "venv",
        ".git",
        "__pycache__",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        "node_modules",
        "site-packages",
    }
)


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # one line per file that could not be read
    files: int = 0


def python_files(paths: Iterable[str]) -> Iterator[str]:
    """Files named on the command line as they are (whatever their extension), and the
    *.py files under named directories, in a stable order."""
    for path in paths:
        if not os.path.isdir(path):
            yield path
            continue
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
            for name in sorted(files):
                if name.endswith(".py"):
                    yield os.path.normpath(os.path.join(root, name))  # "./a.py" -> "a.py"


def _column(lines: list[bytes], node: ast.AST) -> tuple[int, int]:
    """1-based line and column in characters (ast counts UTF-8 bytes)."""
    line = getattr(node, "lineno", 1)
    offset = getattr(node, "col_offset", 0)
    text = lines[line - 1] if line <= len(lines) else b""
    return line, len(text[:offset].decode("utf-8", errors="replace")) + 1


_MENTIONS_REDIS = re.compile(rb"redis|valkey", re.IGNORECASE)
# The first pass keeps the trees it parsed for the second, up to this much source (a
# tree takes about 40 times its source in memory); past it, the second pass parses again.
KEPT_SOURCE_BYTES = 4_000_000


@dataclass
class _Parsed:
    source: bytes
    tree: ast.Module
    inference: Inference


@dataclass
class Project:
    """The first pass's results: the index, and the files it already parsed."""

    index: ProjectIndex = field(default_factory=ProjectIndex)
    parsed: dict[str, _Parsed] = field(default_factory=dict)


def index_project(paths: Iterable[str]) -> Project:
    """The first pass: what each module of the files exports that holds a redis client.
    Only files that mention redis or valkey (and package `__init__.py` files, which
    re-export) can export one; files that cannot be read or parsed are left to the second
    pass, which reports them."""
    project = Project()
    packages: dict[str, str] = {}
    kept = 0
    for path in paths:
        try:
            with open(path, "rb") as handle:
                source = handle.read()
        except OSError:
            continue
        if not (_MENTIONS_REDIS.search(source) or os.path.basename(path) == "__init__.py"):
            continue
        try:
            tree = ast.parse(source, filename=path)
        except (SyntaxError, ValueError, RecursionError):
            continue
        module, package = module_name(path, packages)
        inference = Inference.of(tree, None, module, package)
        project.index.add(module, facts_of(inference, tree))
        if kept + len(source) <= KEPT_SOURCE_BYTES:
            kept += len(source)
            project.parsed[path] = _Parsed(source, tree, inference)
    return project


def lint_source(
    source: bytes | str,
    path: str = "<string>",
    rules: Sequence[Rule] = RULES,
    *,
    project: Project | None = None,
) -> list[Finding]:
    """The findings for one file's source, `# noqa` applied, sorted by position.
    With `project` (from `index_project`), names imported from the project's other
    modules are looked up there. Raises SyntaxError or ValueError if the source is not
    Python."""
    data = source.encode() if isinstance(source, str) else source
    parsed = project.parsed.pop(path, None) if project is not None else None
    if project is None:
        ctx = FileContext.parse(path, data)
    elif parsed is not None and parsed.source == data:
        ctx = FileContext(path, data, parsed.tree, project.index, prepared=parsed.inference)
    else:
        module, package = module_name(path)
        ctx = FileContext.parse(path, data, project.index, module, package)
    lines = data.splitlines()
    # A finding may be silenced on its first line or, for a call written over several
    # lines, on its last (where a formatter leaves the comment after the closing bracket).
    last_lines: dict[Finding, int] = {}
    for rule in rules:
        for node, message in rule.check(ctx):
            line, col = _column(lines, node)
            finding = Finding(path, line, col, rule.code, message)
            last_lines[finding] = getattr(node, "end_lineno", None) or line
    findings = set(last_lines)
    if findings and b"noqa" in data.lower():  # tokenizing is the slow part: only when needed
        suppressed = suppressions(data)
        findings = {
            f
            for f in findings
            if not silenced(suppressed, f.line, f.rule)
            and not silenced(suppressed, last_lines[f], f.rule)
        }
    return sorted(findings)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return f"not Python source: {exc.msg}{where}"
    if isinstance(exc, ValueError | UnicodeDecodeError):
        return f"not Python source: {exc}"
    if isinstance(exc, OSError):
        return f"cannot read it: {exc.strerror or exc}"
    return f"cannot check it: {exc}"


def lint_paths(paths: Iterable[str], rules: Sequence[Rule] = RULES) -> Report:
    """Check every file under `paths`; a file that cannot be read or parsed becomes one
    line in `Report.errors` and the others are still checked."""
    report = Report()
    files = list(python_files(paths))
    with _no_cyclic_gc():
        project = index_project(files)
        _second_pass(files, rules, project, report)
    return report


@contextlib.contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """Syntax trees hold no reference cycles, but hundreds of thousands of their nodes
    alive at once make every cyclic collection scan them all: parsing a project took
    twice as long with the collector on. Reference counting still frees everything."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _second_pass(files: list[str], rules: Sequence[Rule], project: Project, report: Report) -> None:
    for path in files:
        report.files += 1
        try:
            with open(path, "rb") as handle:
                source = handle.read()
            report.findings.extend(lint_source(source, path, rules, project=project))
        except (SyntaxError, ValueError, OSError, RecursionError) as exc:
            report.errors.append(f"{path}: {_describe(exc)}")
        except Exception as exc:  # a bug in a rule: name the file, keep checking the rest
            report.errors.append(
                f"{path}: seawall lint failed on this file ({type(exc).__name__}: {exc}); "
                "please report it with the file"
            )
