"""Findings as text lines (`path:line:col: CODE message`), one JSON list, SARIF 2.1.0 (for
code-scanning dashboards) or GitHub Actions workflow commands (annotations on a pull
request's diff)."""

from __future__ import annotations

import json
import os
import pathlib
from collections.abc import Sequence

from seawall.lint._model import PARSE_ERROR, Finding

_SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def as_text(findings: Sequence[Finding]) -> str:
    return "".join(f"{f.as_text()}\n" for f in findings)


def as_json(findings: Sequence[Finding]) -> str:
    return json.dumps([f.as_json() for f in findings], indent=2, ensure_ascii=False) + "\n"


def _uri(path: str) -> str:
    """A SARIF artifact location: relative paths stay relative (to the run's directory,
    which code-scanning uploads map to the repository), with forward slashes; absolute
    ones become file:// URIs."""
    if os.path.isabs(path):
        return pathlib.Path(path).as_uri()
    return path.replace(os.sep, "/")


def as_sarif(findings: Sequence[Finding]) -> str:
    from seawall.lint.rules import RULES

    rules = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.rationale.split("\n\n")[0].replace("\n", " ")},
            "fullDescription": {"text": rule.rationale},
            "help": {"text": rule.rationale},
        }
        for rule in RULES
    ]
    rules.append(
        {
            "id": PARSE_ERROR,
            "name": "parse-error",
            "shortDescription": {"text": "A file that could not be read or parsed as Python."},
            "fullDescription": {"text": "A file that could not be read or parsed as Python."},
            "help": {"text": "Fix the syntax, or exclude the file."},
        }
    )
    results = [
        {
            "ruleId": f.rule,
            "level": "error",
            "message": {"text": f.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _uri(f.path)},
                        "region": {"startLine": f.line, "startColumn": f.col},
                    }
                }
            ],
        }
        for f in findings
    ]
    log = {
        "$schema": _SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "seawall-lint", "rules": rules}},
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def as_github(findings: Sequence[Finding]) -> str:
    """`::error file=...,line=...,col=...,title=SW001::message`, one line per finding."""
    return "".join(
        f"::error file={_escape_property(f.path)},line={f.line},col={f.col},"
        f"title={_escape_property(f'seawall lint {f.rule}')}::"
        f"{_escape_data(f'{f.rule} {f.message}')}\n"
        for f in findings
    )


FORMATS = {"text": as_text, "json": as_json, "sarif": as_sarif, "github": as_github}
