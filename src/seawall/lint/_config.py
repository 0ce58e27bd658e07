"""`[tool.seawall.lint]` in pyproject.toml: the options a project keeps with its code.

    [tool.seawall.lint]
    select = ["SW001", "SW003"]          # only these rules (default: all)
    ignore = ["SW007"]                   # never these
    exclude = [".venv", "build"]         # replaces the default exclusions
    extend-exclude = ["migrations"]      # adds to them
    respect-gitignore = true             # the default
    [tool.seawall.lint.per-file-ignores]
    "tests/**" = ["SW002", "SW008"]      # test suites flush their own private server

The file used is the nearest pyproject.toml with a `[tool.seawall.lint]` table, looking
up from the first path checked; patterns are relative to its directory.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field

from seawall.lint._files import DEFAULT_EXCLUDE


class ConfigError(ValueError):
    """The configuration is wrong: a usage error (exit status 2)."""


@dataclass
class Config:
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=lambda: list(DEFAULT_EXCLUDE))
    extend_exclude: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    respect_gitignore: bool = True
    root: str = field(default_factory=os.getcwd)
    source: str | None = None  # the pyproject.toml read, if any


_KEYS = {
    "select",
    "extend-select",
    "ignore",
    "exclude",
    "extend-exclude",
    "per-file-ignores",
    "respect-gitignore",
}


def find_pyproject(start: str) -> str | None:
    """The nearest pyproject.toml holding `[tool.seawall.lint]`, from `start` upward."""
    current = os.path.abspath(start)
    if not os.path.isdir(current):
        current = os.path.dirname(current)
    while True:
        candidate = os.path.join(current, "pyproject.toml")
        if os.path.isfile(candidate) and _table(candidate) is not None:
            return candidate
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def _table(path: str) -> dict[str, object] | None:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it: {exc}") from exc
    table = data.get("tool", {}).get("seawall", {}).get("lint")
    return table if isinstance(table, dict) else None


def _strings(path: str, key: str, value: object) -> list[str]:
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise ConfigError(f"{path}: [tool.seawall.lint] {key} must be a list of strings")
    return list(value)


def load(path: str) -> Config:
    """Read one pyproject.toml's `[tool.seawall.lint]`; raises ConfigError."""
    table = _table(path) or {}
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(
            f"{path}: unknown key {', '.join(unknown)} in [tool.seawall.lint] "
            f"(known: {', '.join(sorted(_KEYS))})"
        )
    config = Config(root=os.path.dirname(os.path.abspath(path)), source=path)
    if "select" in table:
        config.select = [c.upper() for c in _strings(path, "select", table["select"])]
    if "extend-select" in table:
        extend = _strings(path, "extend-select", table["extend-select"])
        config.extend_select = [c.upper() for c in extend]
    config.ignore = [c.upper() for c in _strings(path, "ignore", table.get("ignore", []))]
    if "exclude" in table:
        config.exclude = _strings(path, "exclude", table["exclude"])
    config.extend_exclude = _strings(path, "extend-exclude", table.get("extend-exclude", []))
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{path}: [tool.seawall.lint] per-file-ignores must be a table")
    config.per_file_ignores = {
        pattern: [c.upper() for c in _strings(path, f"per-file-ignores {pattern!r}", codes)]
        for pattern, codes in per_file.items()
    }
    respect = table.get("respect-gitignore", True)
    if not isinstance(respect, bool):
        raise ConfigError(f"{path}: [tool.seawall.lint] respect-gitignore must be true or false")
    config.respect_gitignore = respect
    return config
