"""Find the files, index the project, check each file, and keep going past the ones that
are not Python (each becomes one `PARSE_ERROR` finding)."""

from __future__ import annotations

import ast
import contextlib
import gc
import io
import os
import re
import tokenize
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from seawall.lint._context import FileContext
from seawall.lint._facts import facts_of
from seawall.lint._files import DEFAULT_EXCLUDE, Selection, matches, python_files
from seawall.lint._index import ProjectIndex, module_name
from seawall.lint._model import PARSE_ERROR, Finding, Rule
from seawall.lint._names import Inference
from seawall.lint._noqa import silenced, suppressions
from seawall.lint.rules import RULES, lua_keys
from seawall.lint.rules.lua_keys import scan_lua

# Kept for callers of earlier versions: the directory names walks leave out by default.
SKIPPED_DIRS = frozenset(DEFAULT_EXCLUDE)


@dataclass
class Report:
    """Findings of a run, those for files that could not be read or parsed included (as
    `PARSE_ERROR` findings); `errors` lists the latter as `path: message` lines."""

    findings: list[Finding] = field(default_factory=list)
    files: int = 0

    @property
    def errors(self) -> list[str]:
        return [f"{f.path}: {f.message}" for f in self.findings if f.rule == PARSE_ERROR]


def _column(lines: list[bytes], node: ast.AST, encoding: str) -> tuple[int, int]:
    """1-based line and column in characters. ast counts the UTF-8 bytes of the decoded
    line, whatever the file's coding cookie says: a latin-1 file's bytes are decoded
    first, then counted as UTF-8."""
    line = getattr(node, "lineno", 1)
    offset = getattr(node, "col_offset", 0)
    text = lines[line - 1] if line <= len(lines) else b""
    if encoding not in ("utf-8", "utf-8-sig") or (line == 1 and encoding == "utf-8-sig"):
        text = text.decode(encoding, errors="replace").encode("utf-8")
    return line, len(text[:offset].decode("utf-8", errors="replace")) + 1


def _encoding(data: bytes) -> str:
    try:
        return tokenize.detect_encoding(io.BytesIO(data).readline)[0]
    except SyntaxError:
        return "utf-8"


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
        if path.endswith(".lua"):
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
    encoding = _encoding(data)
    # A finding may be silenced on its first line or, for a call written over several
    # lines, on its last (where a formatter leaves the comment after the closing bracket).
    last_lines: dict[Finding, int] = {}
    for rule in rules:
        for node, message in rule.check(ctx):
            line, col = _column(lines, node, encoding)
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


def lint_lua(source: bytes | str, path: str, rules: Sequence[Rule] = RULES) -> list[Finding]:
    """The findings for a Lua script file: SW010's KEYS and FLUSH* calls, if selected."""
    if not any(r.code == lua_keys.check.code for r in rules):
        return []
    text = source.decode("utf-8", errors="replace") if isinstance(source, bytes) else source
    code = lua_keys.check.code
    return [Finding(path, line, col, code, message) for line, col, message in scan_lua(text)]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return f"not Python source: {exc.msg}{where}"
    if isinstance(exc, ValueError | UnicodeDecodeError):
        return f"not Python source: {exc}"
    if isinstance(exc, OSError):
        return f"cannot read it: {exc.strerror or exc}"
    return f"cannot check it: {exc}"


def _error_finding(path: str, exc: BaseException) -> Finding:
    """A file that could not be read or parsed, as a finding at the error's position."""
    line = col = 1
    if isinstance(exc, SyntaxError):
        line, col = exc.lineno or 1, max(exc.offset or 1, 1)
    return Finding(path, line, col, PARSE_ERROR, _describe(exc))


def lint_paths(
    paths: Iterable[str],
    rules: Sequence[Rule] = RULES,
    *,
    selection: Selection | None = None,
    per_file_ignores: Mapping[str, Iterable[str]] | None = None,
) -> Report:
    """Check every file under `paths` (chosen by `selection`: exclusions, .gitignore);
    a file that cannot be read or parsed becomes one `PARSE_ERROR` finding and the others
    are still checked. `per_file_ignores` maps glob patterns (relative to
    `selection.root`) to the rule codes not reported in the files they match."""
    report = Report()
    selection = selection or Selection()
    files = list(python_files(paths, selection))
    with _no_cyclic_gc():
        project = index_project(files)
        _second_pass(files, rules, project, report)
    if per_file_ignores:
        report.findings = [
            f
            for f in report.findings
            if not any(
                f.rule in codes and matches([pattern], f.path, selection.root)
                for pattern, codes in per_file_ignores.items()
            )
        ]
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
            if path.endswith(".lua"):
                report.findings.extend(lint_lua(source, path, rules))
            else:
                report.findings.extend(lint_source(source, path, rules, project=project))
        except (SyntaxError, ValueError, OSError, RecursionError) as exc:
            report.findings.append(_error_finding(path, exc))
        except Exception as exc:  # a bug in a rule: name the file, keep checking the rest
            report.findings.append(
                Finding(
                    path,
                    1,
                    1,
                    PARSE_ERROR,
                    f"seawall lint failed on this file ({type(exc).__name__}: {exc}); "
                    "please report it with the file",
                )
            )
