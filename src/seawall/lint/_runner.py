"""Find the files, check each one, and keep going past the ones that are not Python."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from seawall.lint._context import FileContext
from seawall.lint._model import Finding, Rule
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


def lint_source(
    source: bytes | str, path: str = "<string>", rules: Sequence[Rule] = RULES
) -> list[Finding]:
    """The findings for one file's source, `# noqa` applied, sorted by position.
    Raises SyntaxError or ValueError if the source is not Python."""
    data = source.encode() if isinstance(source, str) else source
    ctx = FileContext.parse(path, data)
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
    for path in python_files(paths):
        report.files += 1
        try:
            with open(path, "rb") as handle:
                source = handle.read()
            report.findings.extend(lint_source(source, path, rules))
        except (SyntaxError, ValueError, OSError, RecursionError) as exc:
            report.errors.append(f"{path}: {_describe(exc)}")
        except Exception as exc:  # a bug in a rule: name the file, keep checking the rest
            report.errors.append(
                f"{path}: seawall lint failed on this file ({type(exc).__name__}: {exc}); "
                "please report it with the file"
            )
    return report
