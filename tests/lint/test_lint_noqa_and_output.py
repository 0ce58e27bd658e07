"""`# noqa` handling, columns, and the two output formats, in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seawall.lint import FORMATS, Finding, lint_paths, lint_source, python_files

HEADER = "import redis\nr = redis.Redis(socket_timeout=1.0)\n"


def _codes(source: str) -> list[tuple[int, str]]:
    return [(f.line, f.rule) for f in lint_source(HEADER + source)]


def test_noqa_with_the_code_silences_only_that_code() -> None:
    assert _codes("r.keys()  # noqa: SW001\n") == []
    assert _codes("r.keys()  # noqa: SW002\n") == [(3, "SW001")]
    assert _codes("r.keys(r.flushdb())  # noqa: SW001\n") == [(3, "SW002")]
    assert _codes("r.keys(r.flushdb())  # noqa: SW001, SW002\n") == []
    assert _codes("r.keys(r.flushdb())  # noqa:SW002,SW001\n") == []
    assert _codes("r.keys()  # NOQA: sw001\n") == []


def test_bare_noqa_silences_every_rule_on_its_line_only() -> None:
    assert _codes("r.keys(r.flushdb())  # noqa\nr.keys()\n") == [(4, "SW001")]
    assert _codes("r.keys()  # noqa (the reason)\n") == []


def test_noqa_after_a_call_written_over_several_lines() -> None:
    assert _codes("r.smembers(\n    'h',\n)  # noqa: SW007\n") == []
    assert _codes("r.smembers(  # noqa: SW007\n    'h',\n)\n") == []
    # A line in the middle is neither where the call starts nor where it ends.
    assert _codes("r.smembers(\n    'h',  # noqa: SW007\n)\n") == [(3, "SW007")]


def test_other_tools_codes_and_strings_do_not_silence() -> None:
    assert _codes("r.keys()  # noqa: E501\n") == [(3, "SW001")]
    assert _codes('r.keys("# noqa")\n') == [(3, "SW001")]
    assert _codes("r.keys()  # type: ignore\n") == [(3, "SW001")]


def test_columns_are_one_based_characters() -> None:
    [finding] = lint_source(HEADER + "x = 'é'; r.keys()\n")
    assert (finding.line, finding.col) == (3, 10)
    [finding] = lint_source(HEADER + "r.keys()\n")
    assert finding.col == 1


def test_text_format_is_path_line_col_code_message() -> None:
    findings = lint_source(HEADER + "r.keys()\nr.flushall()\n", "app/jobs.py")
    text = FORMATS["text"](findings)
    lines = text.splitlines()
    assert lines[0].startswith("app/jobs.py:3:1: SW001 KEYS blocks the server")
    assert lines[1].startswith("app/jobs.py:4:1: SW002 FLUSHALL erases every key")
    assert text.endswith("\n")
    assert FORMATS["text"]([]) == ""


def test_json_format_is_a_list_of_objects() -> None:
    findings = lint_source(HEADER + "r.keys()\n", "app/jobs.py")
    [entry] = json.loads(FORMATS["json"](findings))
    assert entry == {
        "path": "app/jobs.py",
        "line": 3,
        "col": 1,
        "rule": "SW001",
        "message": findings[0].message,
    }
    assert json.loads(FORMATS["json"]([])) == []


def test_findings_sort_by_path_line_col() -> None:
    a = Finding("a.py", 2, 1, "SW002", "m")
    b = Finding("a.py", 10, 1, "SW001", "m")
    c = Finding("b.py", 1, 1, "SW001", "m")
    assert sorted([c, b, a]) == [a, b, c]


def test_directories_are_walked_for_python_files_only(tmp_path: Path) -> None:
    for relative in (
        "pkg/a.py",
        "pkg/sub/b.py",
        "pkg/notes.txt",
        ".venv/lib/c.py",
        ".git/hooks/d.py",
        "pkg/__pycache__/e.py",
    ):
        target = tmp_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(HEADER + "r.keys()\n")
    found = [p.removeprefix(str(tmp_path) + "/") for p in python_files([str(tmp_path)])]
    assert found == ["pkg/a.py", "pkg/sub/b.py"]
    report = lint_paths([str(tmp_path)])
    assert (report.files, len(report.findings), report.errors) == (2, 2, [])


def test_paths_under_the_current_directory_print_without_dot_slash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(HEADER + "r.keys()\n")
    monkeypatch.chdir(tmp_path)
    assert list(python_files(["."])) == ["pkg/a.py"]
    assert [f.path for f in lint_paths(["./pkg"]).findings] == ["pkg/a.py"]


def test_unreadable_and_non_python_files_become_one_line_errors(tmp_path: Path) -> None:
    good = tmp_path / "good.py"
    good.write_text(HEADER + "r.keys()\n")
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    binary = tmp_path / "blob.py"
    binary.write_bytes(b"\x00\x01\x02\xff")
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"x = '\xe9'\n")
    report = lint_paths([str(broken), str(binary), str(latin), str(good)])
    assert [(f.path, f.rule) for f in report.findings] == [
        (str(broken), "SW000"),
        (str(binary), "SW000"),
        (str(latin), "SW000"),
        (str(good), "SW001"),
    ]
    assert (report.findings[0].line, report.findings[0].col) == (1, 7)  # where the parser stopped
    assert len(report.errors) == 3
    for path, error in zip((broken, binary, latin), report.errors, strict=True):
        assert error.startswith(f"{path}: not Python source")
        assert "\n" not in error


def test_a_file_that_cannot_be_read_is_named(tmp_path: Path) -> None:
    # A dangling symlink: found by the walk, gone when opened (chmod cannot stop root).
    (tmp_path / "gone.py").symlink_to(tmp_path / "nowhere.py")
    report = lint_paths([str(tmp_path)])
    assert [(f.rule, f.message) for f in report.findings] == [
        ("SW000", "cannot read it: No such file or directory")
    ]
    assert report.errors == [f"{tmp_path / 'gone.py'}: cannot read it: No such file or directory"]
