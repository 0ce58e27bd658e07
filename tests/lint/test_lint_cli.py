"""`python -m seawall lint` as a user runs it: output, exit codes, and errors without
tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from seawall.cli import main

SRC = Path(__file__).resolve().parents[2] / "src"
FIXTURES = Path(__file__).parent / "fixtures"


def _lint(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "seawall", "lint", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


def test_findings_as_text_exit_1(tmp_path: Path) -> None:
    (tmp_path / "jobs.py").write_text(
        "import redis\n"
        "r = redis.Redis()\n"
        "for k in r.keys('job:*'):\n"
        "    r.get(k)\n"
        "r.flushdb()  # noqa: SW002\n"
    )
    run = _lint("jobs.py", cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    assert run.stderr == ""
    assert [line.split(" ", 2)[:2] for line in run.stdout.splitlines()] == [
        ["jobs.py:2:5:", "SW008"],
        ["jobs.py:3:10:", "SW001"],
        ["jobs.py:4:5:", "SW006"],
    ]


def test_sw007_runs_only_when_asked_for(tmp_path: Path) -> None:
    """Whole-collection reads need a judgement the code cannot show (how big the
    collection grows): on fetched projects half of its findings read small sets of names,
    so it is asked for by name, on the command line or in [tool.seawall.lint]."""
    fixture = str(FIXTURES / "sw007_bad.py")
    assert "SW007" not in _lint(fixture).stdout
    assert "SW007" in _lint("--extend-select", "SW007", fixture).stdout
    assert "SW007" in _lint("--select", "SW007", fixture).stdout
    (tmp_path / "pyproject.toml").write_text('[tool.seawall.lint]\nextend-select = ["SW007"]\n')
    run = _lint("--config", str(tmp_path / "pyproject.toml"), fixture)
    assert "SW007" in run.stdout and "SW008" not in _lint("--select", "SW007", fixture).stdout


def test_json_format_and_clean_code_exit_0(tmp_path: Path) -> None:
    run = _lint("--format", "json", "--select", "SW007", str(FIXTURES / "sw007_bad.py"))
    assert run.returncode == 1
    entries = json.loads(run.stdout)
    assert [(e["line"], e["col"], e["rule"]) for e in entries][:2] == [
        (6, 11, "SW007"),
        (7, 11, "SW007"),
    ]
    assert set(entries[0]) == {"path", "line", "col", "rule", "message"}
    clean = _lint(
        "--format", "json", str(FIXTURES / "sw007_good.py"), str(FIXTURES / "sw001_good.py")
    )
    assert (clean.returncode, json.loads(clean.stdout), clean.stderr) == (0, [], "")


def test_a_directory_is_walked(tmp_path: Path) -> None:
    run = _lint(str(FIXTURES), "--select", "SW003,SW004")
    assert run.returncode == 1
    rules = {line.split(" ")[1] for line in run.stdout.splitlines()}
    assert rules == {"SW003", "SW004"}
    files = {Path(line.split(":")[0]).name for line in run.stdout.splitlines()}
    assert files == {"sw003_bad.py", "sw004_bad.py", "keys_bad.py"}
    ignored = _lint(str(FIXTURES / "sw001_bad.py"), "--ignore", "sw001")
    assert (ignored.returncode, ignored.stdout) == (0, "")


def test_a_file_that_is_not_python_is_a_finding_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A parse error is a finding (SW000) like any other: it shows in every format, and a
    # run with one exits 1, never 2 (that is for usage errors only).
    (tmp_path / "notes.txt").write_text("This is not Python: it has a colon.\n")
    (tmp_path / "blob.py").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tmp_path / "legacy.py").write_text("print 'hello'\n")  # Python 2
    run = _lint(
        str(tmp_path / "notes.txt"),
        str(tmp_path / "blob.py"),
        str(tmp_path / "legacy.py"),
        str(FIXTURES / "sw002_bad.py"),
    )
    assert run.returncode == 1
    assert (run.stderr, "Traceback" in run.stdout) == ("", False)
    lines = run.stdout.splitlines()
    assert (
        lines[0].startswith(f"{tmp_path / 'notes.txt'}:1:")
        and " SW000 not Python source" in lines[0]
    )
    assert lines[1].startswith(f"{tmp_path / 'blob.py'}:1:1: SW000 not Python source")
    assert lines[2].startswith(f"{tmp_path / 'legacy.py'}:1:1: SW000 not Python source")
    assert len(lines) == 3 + 4  # sw002_bad.py was checked all the same
    # The other formats and --ignore, in-process (no interpreter start-up).
    assert main(["lint", "--format", "json", str(tmp_path / "legacy.py")]) == 1
    [entry] = json.loads(capsys.readouterr().out)
    assert (entry["rule"], entry["line"]) == ("SW000", 1)
    assert entry["message"].startswith("not Python source: Missing parentheses")
    assert main(["lint", "--ignore", "SW000", str(tmp_path / "legacy.py")]) == 0
    assert capsys.readouterr().out == ""


def test_a_missing_path_is_a_usage_error_exit_2(tmp_path: Path) -> None:
    run = _lint(str(tmp_path / "missing.py"))
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert "missing.py" in run.stderr and "does not exist" in run.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "Missing argument"),
        (["--format", "xml", str(FIXTURES)], "'xml' is not one of"),
        (["--select", "SW999", str(FIXTURES)], "unknown rule code SW999"),
        (["--ignore", "SW001,XX1", str(FIXTURES)], "unknown rule code XX1"),
    ],
)
def test_usage_errors_exit_2(
    args: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The same entry point as `python -m seawall`, in-process: no interpreter start-up.
    assert main(["lint", *args]) == 2
    captured = capsys.readouterr()
    assert says in captured.err
    assert captured.out == ""


def test_no_python_files_is_said_and_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "README.md").write_text("# not code\n")
    assert main(["lint", str(tmp_path)]) == 0
    assert capsys.readouterr().err == f"seawall lint: no *.py files under {tmp_path}\n"


def test_explain_prints_a_rule_rationale(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--explain", "sw003"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SW003 setnx-then-expire\n\n")
    assert "seed 003" in out and "Fix:" in out
    assert main(["lint", "--explain", "SW042"]) == 2
    assert "unknown rule code SW042" in capsys.readouterr().err
