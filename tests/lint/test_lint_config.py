"""Choosing files and rules the way a project gates CI: --exclude, pyproject.toml's
[tool.seawall.lint], .gitignore, per-file ignores, SARIF and GitHub output, columns in
files with a coding cookie. In-process, through the same entry point as the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seawall.cli import main
from seawall.lint import lint_source

BAD = "import redis\nr = redis.Redis(socket_timeout=1.0)\nr.keys()\nr.flushdb()\n"


def _tree(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[tuple[str, str]], str]:
    code = main(["lint", *args])
    captured = capsys.readouterr()
    found = [(line.split(":")[0], line.split(" ")[1]) for line in captured.out.splitlines()]
    return code, found, captured.err


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _tree(
        tmp_path,
        {
            "app/jobs.py": BAD,
            "app/migrations/0001.py": BAD,
            "tests/test_jobs.py": BAD,
            "build/lib/app/jobs.py": BAD,
        },
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_exclude_and_extend_exclude(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, found, _ = _run(capsys, ".", "--extend-exclude", "migrations,build")
    assert code == 1
    assert sorted({path for path, _ in found}) == ["app/jobs.py", "tests/test_jobs.py"]
    # --exclude replaces the defaults: anchored patterns are relative to the root.
    _, found, _ = _run(capsys, ".", "--exclude", "app/migrations,build/**,tests")
    assert sorted({path for path, _ in found}) == ["app/jobs.py"]


def test_pyproject_config(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / "pyproject.toml").write_text(
        "[project]\nname = 'x'\n\n"
        "[tool.seawall.lint]\n"
        'ignore = ["SW002"]\n'
        'extend-exclude = ["migrations", "build"]\n'
        "[tool.seawall.lint.per-file-ignores]\n"
        '"tests/**" = ["SW001"]\n'
    )
    code, found, err = _run(capsys, ".")
    assert (code, err) == (1, "")
    assert found == [("app/jobs.py", "SW001")]
    # Checked from a subdirectory, the same file is found and its patterns still apply.
    code, found, _ = _run(capsys, str(project / "tests"))
    assert (code, found) == (0, [])
    # --select on the command line wins over the file's rules; --isolated reads no file.
    _, found, _ = _run(capsys, ".", "--select", "SW002", "--isolated")
    assert {rule for _, rule in found} == {"SW002"}
    assert len(found) == 4


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('selec = ["SW001"]', "unknown key selec"),
        ('ignore = ["SW099"]', "unknown rule code SW099"),
        ('ignore = "SW001"', "ignore must be a list of strings"),
        ('[tool.seawall.lint.per-file-ignores]\n"x" = ["XX1"]', "unknown rule code XX1"),
    ],
)
def test_a_wrong_config_is_a_usage_error(
    project: Path, capsys: pytest.CaptureFixture[str], table: str, says: str
) -> None:
    (project / "pyproject.toml").write_text(f"[tool.seawall.lint]\n{table}\n")
    code = main(["lint", "."])
    captured = capsys.readouterr()
    assert code == 2
    assert says in captured.err
    assert captured.out == ""


def test_gitignore_is_respected(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (project / ".git" / "info").mkdir(parents=True)
    (project / ".git" / "info" / "exclude").write_text("build/\n")
    (project / ".gitignore").write_text("# generated\n/app/migrations/*\n")
    (project / "tests" / ".gitignore").write_text("test_*.py\n!test_jobs.py\n")
    (project / "tests" / "test_gen.py").write_text(BAD)
    _, found, _ = _run(capsys, ".")
    assert sorted({path for path, _ in found}) == ["app/jobs.py", "tests/test_jobs.py"]
    # A subdirectory checked alone still sees the repository's .gitignore above it.
    _, found, _ = _run(capsys, "app")
    assert sorted({path for path, _ in found}) == ["app/jobs.py"]
    _, found, _ = _run(capsys, ".", "--no-respect-gitignore")
    assert len({path for path, _ in found}) == 5


def test_per_file_ignores_on_the_command_line(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, found, _ = _run(capsys, "tests", "app/jobs.py", "--per-file-ignores", "tests/**:SW001,SW002")
    assert sorted({path for path, _ in found}) == ["app/jobs.py"]


def test_sarif_output(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "app/jobs.py", "--format", "sarif"]) == 1
    log = json.loads(capsys.readouterr().out)
    assert log["version"] == "2.1.0"
    [run] = log["runs"]
    assert {r["id"] for r in run["tool"]["driver"]["rules"]} >= {"SW000", "SW001", "SW008"}
    first = run["results"][0]
    assert first["ruleId"] == "SW001"
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "app/jobs.py"
    assert location["region"] == {"startLine": 3, "startColumn": 1}
    assert main(["lint", str(project / "app" / "jobs.py"), "--format", "sarif"]) == 1
    [run] = json.loads(capsys.readouterr().out)["runs"]
    uri = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == (project / "app" / "jobs.py").as_uri()


def test_github_annotations(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "app/jobs.py", "--format", "github"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("::error file=app/jobs.py,line=3,col=1,title=seawall lint SW001::")
    assert lines[0].split("::", 2)[2].startswith("SW001 KEYS blocks the server")
    assert len(lines) == 2


def test_columns_in_a_file_with_a_coding_cookie() -> None:
    # ast counts the UTF-8 bytes of the decoded line: 'é' is one byte in latin-1, two in
    # UTF-8, and the column is in characters either way.
    source = (
        "# -*- coding: latin-1 -*-\n"
        "import redis\n"
        "r = redis.Redis(socket_timeout=1.0)\n"
        "x = '\xe9\xe9'; r.keys()\n"
    ).encode("latin-1")
    [finding] = lint_source(source)
    assert (finding.line, finding.col) == (4, 11)


def test_a_byte_order_mark_does_not_shift_the_first_line() -> None:
    source = "import redis; redis.Redis(socket_timeout=1.0).keys()\n".encode("utf-8-sig")
    [finding] = lint_source(source)
    assert (finding.line, finding.col) == (1, 15)


def test_lua_files_are_read_for_keys_and_flush(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _tree(
        project,
        {
            "app/scripts/clear.lua": (
                "-- KEYS[1] prefix\n"
                "-- redis.call('KEYS', '*') in a comment is not a call\n"
                "local found = redis.call('KEYS', KEYS[1] .. '*')\n"
                "redis.call('FLUSHDB')  -- noqa: SW010\n"
                "return #found\n"
            )
        },
    )
    code, found, _ = _run(capsys, "app/scripts")
    assert (code, found) == (1, [("app/scripts/clear.lua", "SW010")])
    assert main(["lint", "app/scripts/clear.lua", "--format", "json"]) == 1
    [entry] = json.loads(capsys.readouterr().out)
    assert (entry["line"], entry["col"]) == (3, 15)
    assert main(["lint", "app/scripts", "--ignore", "SW010"]) == 0
