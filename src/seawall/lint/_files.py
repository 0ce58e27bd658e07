"""Which files a run checks: the walk, `exclude` patterns and `.gitignore`.

Files named on the command line are checked whatever their name; directories are walked
for `*.py`, leaving out what `exclude` (or, past the defaults, `extend-exclude`) matches and
what the `.gitignore` files of the walked tree (and of its parents, up to the repository
root) and the repository's `.git/info/exclude` ignore. The reading is the part of git's
rules that projects use: comments, `!` negation, a trailing `/` for directories, a
leading or inner `/` to anchor a pattern to its file's directory, `*`, `?`, `[...]`, `**`.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

# Directories never walked into unless `exclude` is replaced: environments, VCS data and
# caches hold code that is not the project's (or is not code at all).
DEFAULT_EXCLUDE: tuple[str, ...] = (
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
)


def _relative(path: str, root: str) -> str:
    """`path` relative to `root` with forward slashes; the absolute path if outside."""
    absolute = os.path.abspath(path)
    try:
        relative = os.path.relpath(absolute, root)
    except ValueError:  # another drive on Windows
        return absolute.replace(os.sep, "/")
    if relative.startswith(".."):
        return absolute.replace(os.sep, "/")
    return relative.replace(os.sep, "/")


def matches(patterns: Iterable[str], path: str, root: str, walked: str | None = None) -> bool:
    """Whether an exclude (or per-file-ignores) glob matches `path`: a pattern without a
    slash matches the file's or a parent directory's name (`tests`, `*_pb2.py`); one
    with a slash matches the path relative to `root` (`src/legacy/*`, `tests/**`).
    With `walked`, names are only matched below it: checking a directory inside a
    `.venv` checks it."""
    relative = _relative(path, root)
    parts = relative.split("/")
    names = _relative(path, walked).split("/") if walked is not None else parts
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        if "/" in pattern:
            pattern = pattern.removeprefix("./")
            prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
            if any(fnmatch.fnmatchcase(p, pattern) for p in prefixes):
                return True
            if pattern.endswith("/**") and relative.startswith(pattern[:-3] + "/"):
                return True
        elif any(fnmatch.fnmatchcase(name, pattern) for name in names):
            return True
    return False


@dataclass(frozen=True)
class _IgnoreRule:
    base: str  # the directory of the .gitignore, absolute
    regex: re.Pattern[str]
    negated: bool
    directories_only: bool


def _glob_to_regex(pattern: str) -> str:
    out, position = [], 0
    while position < len(pattern):
        char = pattern[position]
        if pattern.startswith("**/", position):
            out.append("(?:.*/)?")
            position += 3
            continue
        if pattern.startswith("/**", position) and position + 3 == len(pattern):
            out.append("/.*")
            position += 3
            continue
        if pattern.startswith("**", position):
            out.append(".*")
            position += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", position + 1)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = pattern[position + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                position = end
        elif char == "\\" and position + 1 < len(pattern):
            position += 1
            out.append(re.escape(pattern[position]))
        else:
            out.append(re.escape(char))
        position += 1
    return "".join(out)


def parse_gitignore(text: str, base: str) -> list[_IgnoreRule]:
    rules = []
    for line in text.splitlines():
        line = line.rstrip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        if negated or line.startswith("\\"):
            line = line[1:]
        directories_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        body = _glob_to_regex(line.lstrip("/"))
        regex = re.compile(body if anchored else f"(?:.*/)?{body}")
        rules.append(_IgnoreRule(base, regex, negated, directories_only))
    return rules


@dataclass
class GitIgnore:
    """The rules of the `.gitignore` files read so far; the last matching rule wins."""

    rules: list[_IgnoreRule] = field(default_factory=list)
    _read: set[str] = field(default_factory=set)

    def read(self, directory: str, name: str = ".gitignore") -> None:
        """The rules of `directory`'s .gitignore (or of another file holding patterns
        relative to it, such as the repository's `.git/info/exclude`)."""
        directory = os.path.abspath(directory)
        path = os.path.join(directory, name)
        if path in self._read:
            return
        self._read.add(path)
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError):
            return
        self.rules.extend(parse_gitignore(text, directory))

    def read_parents(self, directory: str) -> None:
        """The repository's `.git/info/exclude` and the .gitignore files from its root
        (the directory holding `.git`) down to `directory`; outside a repository, none
        above it."""
        chain, current = [], os.path.abspath(directory)
        while True:
            chain.append(current)
            if os.path.exists(os.path.join(current, ".git")):
                self.read(current, os.path.join(".git", "info", "exclude"))
                break
            parent = os.path.dirname(current)
            if parent == current:
                chain = chain[:1]  # no repository above: only the walked tree's own files
                break
            current = parent
        for each in reversed(chain):
            self.read(each)

    def ignored(self, path: str, is_directory: bool) -> bool:
        absolute = os.path.abspath(path)
        verdict = False
        for rule in self.rules:
            if rule.directories_only and not is_directory:
                continue
            if not absolute.startswith(rule.base + os.sep):
                continue
            relative = absolute[len(rule.base) + 1 :].replace(os.sep, "/")
            if rule.regex.fullmatch(relative):
                verdict = not rule.negated
        return verdict


@dataclass(frozen=True)
class Selection:
    """How to choose files: glob patterns to leave out, relative to `root`, and whether
    `.gitignore` files count."""

    exclude: Sequence[str] = DEFAULT_EXCLUDE
    extend_exclude: Sequence[str] = ()
    respect_gitignore: bool = True
    root: str = field(default_factory=os.getcwd)

    @property
    def patterns(self) -> tuple[str, ...]:
        return (*self.exclude, *self.extend_exclude)


# Python files, and Lua scripts (SW010 reads them for KEYS and FLUSH* calls).
CHECKED_SUFFIXES = (".py", ".lua")


def python_files(paths: Iterable[str], selection: Selection | None = None) -> Iterator[str]:
    """Files named on the command line as they are (whatever their extension or the
    exclusions), and the *.py and *.lua files under named directories, in a stable
    order."""
    selection = selection or Selection()
    patterns, root = selection.patterns, os.path.abspath(selection.root)
    for path in paths:
        if not os.path.isdir(path):
            yield path
            continue
        ignore = GitIgnore()
        if selection.respect_gitignore:
            ignore.read_parents(path)
        for directory, dirs, files in os.walk(path):
            if selection.respect_gitignore:
                ignore.read(directory)
            kept = []
            for name in sorted(dirs):
                full = os.path.join(directory, name)
                if matches(patterns, full, root, path) or ignore.ignored(full, True):
                    continue
                kept.append(name)
            dirs[:] = kept
            for name in sorted(files):
                if not name.endswith(CHECKED_SUFFIXES):
                    continue
                full = os.path.join(directory, name)
                if matches(patterns, full, root, path) or ignore.ignored(full, False):
                    continue
                yield os.path.normpath(full)  # "./a.py" -> "a.py"
