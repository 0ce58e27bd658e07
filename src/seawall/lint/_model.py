"""What a rule is and what it reports: the two records every other lint module shares."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seawall.lint._context import FileContext

# Not a rule: the code of the finding for a file that could not be read or parsed (a
# syntax error, Python 2, binary data, a bad encoding). Reported like any finding, so it
# shows in every output format and a run with one exits 1, not 2.
PARSE_ERROR = "SW000"

# A rule's check yields the node to point at and the message to print there.
Check = Callable[["FileContext"], Iterator[tuple[ast.AST, str]]]


@dataclass(frozen=True)
class Rule:
    """One check: `code` (SW001...), a short `name`, the check itself, and its rationale
    (the check function's docstring, which cites the guideline or seed it comes from)."""

    code: str
    name: str
    check: Check
    # Run unless rules are chosen (`--select`); False for a rule whose findings need a
    # judgement the code cannot show (how big a collection grows): asked for by name.
    default: bool = True

    @property
    def rationale(self) -> str:
        return inspect.cleandoc(self.check.__doc__ or "")


@dataclass(frozen=True, order=True)
class Finding:
    """One problem: where it is (1-based line and column, as ruff and flake8 print them),
    which rule found it and what to do instead."""

    path: str
    line: int
    col: int
    rule: str
    message: str

    def as_text(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.rule} {self.message}"

    def as_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "rule": self.rule,
            "message": self.message,
        }


def rule(code: str, name: str, *, default: bool = True) -> Callable[[Check], Rule]:
    """Turn a check function into a `Rule` (the ruff model: one function, one code)."""

    def wrap(check: Check) -> Rule:
        return Rule(code=code, name=name, check=check, default=default)

    return wrap
