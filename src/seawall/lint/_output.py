"""Findings as text lines (`path:line:col: CODE message`) or as one JSON list."""

from __future__ import annotations

import json
from collections.abc import Sequence

from seawall.lint._model import Finding


def as_text(findings: Sequence[Finding]) -> str:
    return "".join(f"{f.as_text()}\n" for f in findings)


def as_json(findings: Sequence[Finding]) -> str:
    return json.dumps([f.as_json() for f in findings], indent=2, ensure_ascii=False) + "\n"


FORMATS = {"text": as_text, "json": as_json}
