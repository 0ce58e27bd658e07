"""Patterns of real redis-py code, one small project each (`corpus/NAME/`), written here
to reproduce what the linter must find and must leave alone: clients held by Redis
subclasses, handed to helper classes, kept in collections of shards, locks released with
DEL or never expired, KEYS inside Lua scripts, priority-ordered pops, object hashes,
settings that only look like clients, workers that block on BLPOP.

Each project's `expected.txt` lists every finding, one per line, as `PATH:LINE CODE  why
it is a hazard`; the test fails on any finding missing and on any finding not listed, so
a precision or recall regression shows up as a diff of this file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from seawall.lint import Selection, lint_paths

CORPUS = Path(__file__).parent / "corpus"
_LINE = re.compile(r"^(?P<path>\S+):(?P<line>\d+) (?P<code>SW\d{3})\s+(?P<why>\S.*)$")


def _expected(project: Path) -> set[tuple[str, int, str]]:
    found = set()
    for text in (project / "expected.txt").read_text().splitlines():
        if not text.strip():
            continue
        match = _LINE.match(text)
        assert match, f"{project.name}/expected.txt: {text!r} is not PATH:LINE CODE  why"
        found.add((match["path"], int(match["line"]), match["code"]))
    return found


@pytest.mark.parametrize("project", sorted(CORPUS.iterdir()), ids=lambda p: p.name)
def test_corpus_project_findings_are_exactly_the_expected_ones(project: Path) -> None:
    report = lint_paths([str(project)], selection=Selection(root=str(project)))
    reported = {
        (Path(f.path).relative_to(project).as_posix(), f.line, f.rule) for f in report.findings
    }
    expected = _expected(project)
    assert sorted(reported - expected) == [], "new findings (false positives?)"
    assert sorted(expected - reported) == [], "missing findings (lost recall?)"


def test_blocking_worker_is_told_a_timeout_above_its_block_time() -> None:
    project = CORPUS / "blocking_worker"
    [finding] = lint_paths([str(project)], selection=Selection(root=str(project))).findings
    assert "BLPOP (line 8, 5 s)" in finding.message
    assert "socket_timeout=10 or more" in finding.message
