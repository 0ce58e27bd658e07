"""`seawall lint`: a static check of Python code that uses redis-py (sync and asyncio).

    from seawall.lint import lint_source, lint_paths, RULES
    lint_source(code) -> [Finding(path, line, col, rule, message), ...]

Rules live one per module in `seawall.lint.rules`. How the linter decides that an object
is a redis client: `seawall.lint._bindings` (where names are bound), `_names` (the
judgement), `_annotations`, and for a project `_index` and `_facts` (the first pass over
all files). Choosing files: `_files` (exclusions, .gitignore) and `_config`
(`[tool.seawall.lint]`). See docs/lint.md.
"""

from __future__ import annotations

from seawall.lint._config import Config, ConfigError, find_pyproject
from seawall.lint._config import load as load_config
from seawall.lint._files import Selection, python_files
from seawall.lint._model import PARSE_ERROR, Finding, Rule
from seawall.lint._output import FORMATS
from seawall.lint._runner import Report, index_project, lint_paths, lint_source
from seawall.lint.rules import BY_CODE, RULES

__all__ = [
    "BY_CODE",
    "FORMATS",
    "PARSE_ERROR",
    "RULES",
    "Config",
    "ConfigError",
    "Finding",
    "Report",
    "Rule",
    "Selection",
    "find_pyproject",
    "index_project",
    "lint_paths",
    "lint_source",
    "load_config",
    "python_files",
]
