"""`seawall lint`: a static check of Python code that uses redis-py (sync and asyncio).

    from seawall.lint import lint_source, lint_paths, RULES
    lint_source(code) -> [Finding(path, line, col, rule, message), ...]

Rules live one per module in `seawall.lint.rules`; how the linter decides that an object
is a redis client is in `seawall.lint._names` (and docs/lint.md).
"""

from __future__ import annotations

from seawall.lint._model import Finding, Rule
from seawall.lint._output import FORMATS
from seawall.lint._runner import Report, lint_paths, lint_source, python_files
from seawall.lint.rules import BY_CODE, RULES

__all__ = [
    "BY_CODE",
    "FORMATS",
    "RULES",
    "Finding",
    "Report",
    "Rule",
    "lint_paths",
    "lint_source",
    "python_files",
]
