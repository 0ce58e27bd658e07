"""Run `seawall ...` in-process as a user would, capturing what it prints."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from seawall.cli import main


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


def seawall(capsys: pytest.CaptureFixture[str], *args: str) -> Run:
    capsys.readouterr()
    code = main(list(args))
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err)


def one_line_error(run: Run, command: str) -> str:
    """The error of a failed run: exactly one line on stderr, no traceback."""
    assert run.code != 0, run.out
    assert "Traceback" not in run.err, run.err
    lines = run.err.strip().splitlines()
    assert len(lines) == 1, run.err
    assert lines[0].startswith((f"seawall {command}:", "Error:")), run.err
    return lines[0]
