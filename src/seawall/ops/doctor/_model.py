"""What a doctor rule is and what it reports (the model of `seawall.lint`'s rules)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from seawall.ops.doctor._snapshot import Snapshot

Severity = Literal["info", "warning", "error"]
SEVERITIES: tuple[Severity, ...] = ("info", "warning", "error")


@dataclass(frozen=True)
class Finding:
    rule: str
    name: str
    severity: Severity
    message: str
    guideline: str
    fix: str
    node: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "guideline": self.guideline,
            "fix": self.fix,
            "node": self.node,
        }


# A check yields (severity, message, fix, node); the rule adds its code and guideline.
Yielded = tuple[Severity, str, str, "str | None"]
Check = Callable[["Snapshot"], Iterator[Yielded]]


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    guideline: str
    check: Check

    @property
    def rationale(self) -> str:
        return inspect.cleandoc(self.check.__doc__ or "")

    def run(self, snapshot: Snapshot) -> list[Finding]:
        return [
            Finding(self.code, self.name, severity, message, self.guideline, fix, node)
            for severity, message, fix, node in self.check(snapshot)
        ]


def rule(code: str, name: str, guideline: str) -> Callable[[Check], Rule]:
    def wrap(check: Check) -> Rule:
        return Rule(code, name, guideline, check)

    return wrap


ALIBABA = "Alibaba Cloud Redis development guidelines"
