"""`seawall doctor`: audit a live server against Alibaba's Redis development guidelines and
the server's own advice (MEMORY DOCTOR, LATENCY DOCTOR).

`collect` reads a `Snapshot` (the only I/O); `diagnose` runs every rule over it.
"""

from __future__ import annotations

from seawall.ops.doctor._model import SEVERITIES, Finding, Rule
from seawall.ops.doctor._snapshot import Snapshot, collect
from seawall.ops.doctor.rules import BY_CODE, RULES

__all__ = ["BY_CODE", "RULES", "SEVERITIES", "Finding", "Rule", "Snapshot", "collect", "diagnose"]


def diagnose(snapshot: Snapshot) -> list[Finding]:
    """Every finding, errors first, then by rule code."""
    found = [finding for rule in RULES for finding in rule.run(snapshot)]
    order = {severity: index for index, severity in enumerate(reversed(SEVERITIES))}
    return sorted(found, key=lambda f: (order[f.severity], f.rule))
