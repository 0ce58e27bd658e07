"""Django's own test suites, fetched at test time: the sdist of each Django release series,
its cache and session tests extracted, and a Python to run them with.

Nothing of Django's is committed: sdists and extracted trees live in the virtualenv that
runs the tests (<venv>/django-suites/), so a fresh .venv fetches them again. The Django
that runs a suite is the one in the same sdist (its folder first on PYTHONPATH), so the
tests and the framework always match.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(sys.prefix) / "django-suites"
# The release series whose suites run: the LTS and the current release, with the oldest
# Python each supports.
SERIES = {"5.2": (3, 10), "6.1": (3, 12)}
# What a suite's Python needs besides Django (which comes from the sdist) and seawall
# (from src/): Django's own requirements and redis-py.
RUNTIME = ["asgiref>=3.8", "sqlparse>=0.5", "redis>=5"]
PYTHON_ENV = "SEAWALL_DJANGO_PYTHON"
# This environment's pip, installing into another Python's environment.
PIP_INTO = [sys.executable, "-m", "pip", "--python"]


class SuiteSetupError(Exception):
    """What is missing to run a suite, and how to get it."""


@dataclass(frozen=True)
class Suite:
    series: str
    version: str  # the exact release of the sdist
    root: Path  # holds django/ and tests/ of that release
    python: str

    @property
    def tests_dir(self) -> Path:
        return self.root / "tests"


def _pythons(wanted: tuple[int, int]) -> list[str]:
    """Interpreters at least `wanted`: this one, $SEAWALL_DJANGO_PYTHON, python3.N on PATH,
    then pyenv's."""
    found = []
    if sys.version_info[:2] >= wanted:
        found.append(sys.executable)
    if os.environ.get(PYTHON_ENV):
        found.append(os.environ[PYTHON_ENV])
    for minor in range(wanted[1], wanted[1] + 6):
        on_path = shutil.which(f"python{wanted[0]}.{minor}")
        if on_path:
            found.append(on_path)
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for candidate in sorted(glob.glob(str(pyenv / "3.*" / "bin" / "python")), reverse=True):
        match = re.search(r"/3\.(\d+)\.", candidate)
        if match and (3, int(match.group(1))) >= wanted:
            found.append(candidate)
    return found


def _runs(python: str, wanted: tuple[int, int]) -> bool:
    check = f"import sys; sys.exit(sys.version_info[:2] < {wanted!r})"
    try:
        return (
            subprocess.run([python, "-c", check], capture_output=True, timeout=30).returncode == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return False


def _check_output(args: list[str], what: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        raise SuiteSetupError(f"{what} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout


def python_for(series: str) -> str:
    """A Python that can run Django `series`, with RUNTIME installed; for an interpreter
    other than this one, a virtualenv of its own under CACHE."""
    wanted = SERIES[series]
    candidates = _pythons(wanted)
    if not candidates:
        raise SuiteSetupError(
            f"Django {series} needs Python {wanted[0]}.{wanted[1]} or newer and none was "
            f"found (this is {sys.version.split()[0]}): install one (apt install "
            f"python{wanted[0]}.{wanted[1]}, or pyenv install {wanted[0]}.{wanted[1]}) or "
            f"set {PYTHON_ENV}=/path/to/python{wanted[0]}.{wanted[1]}"
        )
    if candidates[0] == sys.executable:
        return sys.executable  # the dev extra installs Django, hence its requirements
    # pyenv's shims stand on PATH for versions that are not selected: run each to see.
    working = [c for c in candidates if _runs(c, wanted)]
    if not working:
        raise SuiteSetupError(
            f"Django {series} needs Python {wanted[0]}.{wanted[1]} or newer; none of "
            f"{candidates} runs as one: set {PYTHON_ENV}=/path/to/python{wanted[0]}.{wanted[1]}"
        )
    venv = CACHE / f"python-{series}"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    if not stamp.exists() or stamp.read_text() != " ".join(RUNTIME):
        shutil.rmtree(venv, ignore_errors=True)
        # Without a pip of its own: this environment's pip installs into it (--python),
        # without byte-compiling, in a third of the time.
        _check_output([working[0], "-m", "venv", "--without-pip", str(venv)], f"creating {venv}")
        _check_output(
            [*PIP_INTO, str(python), "install", "--quiet", "--no-compile", *RUNTIME],
            f"installing {' '.join(RUNTIME)} into {venv}",
        )
        stamp.write_text(" ".join(RUNTIME))
    return str(python)


def _version_of(sdist: Path) -> str:
    match = re.fullmatch(r"[Dd]jango-(.+)\.tar\.gz", sdist.name)
    assert match, sdist
    return match.group(1)


def sdist_for(series: str, python: str) -> Path:
    """The newest sdist of `series` already fetched, else the newest the index has."""
    folder = CACHE / "sdists"
    folder.mkdir(parents=True, exist_ok=True)

    def fetched() -> list[Path]:
        found = [p for p in folder.glob("*.tar.gz") if _version_of(p).startswith(series + ".")]
        return sorted(found, key=lambda p: [int(n) for n in re.findall(r"\d+", _version_of(p))])

    if not fetched():
        _check_output(
            [
                *PIP_INTO,
                python,  # whose version decides which releases fit
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"django=={series}.*",
                "--dest",
                str(folder),
            ],
            f"downloading Django {series}'s sdist",
        )
    found = fetched()
    if not found:
        raise SuiteSetupError(f"pip download left no sdist of Django {series} in {folder}")
    return found[-1]


def extract(sdist: Path) -> Path:
    """django/, tests/cache/ and tests/sessions_tests/ of `sdist`, extracted once."""
    version = _version_of(sdist)
    root = CACHE / f"django-{version}"
    done = root / ".extracted"
    if done.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    top = f"django-{version}/"
    wanted = (top + "django/", top + "tests/cache/", top + "tests/sessions_tests/")
    with tarfile.open(sdist) as archive:
        members = []
        for member in archive.getmembers():
            if member.name.startswith(wanted) and (member.isfile() or member.isdir()):
                member.name = member.name[len(top) :]
                members.append(member)
        archive.extractall(root, members=members, filter="data")
    done.write_text(version)
    return root


def prepare(series: str) -> Suite:
    python = python_for(series)
    sdist = sdist_for(series, python)
    return Suite(series, _version_of(sdist), extract(sdist), python)


# The runner's suites (djangosuite_runner.suites), each run by a process of its own.
PARTS = ("cache", "cache-async", "cache-stale", "sessions")


def start(suite: Suite, url: str, out: Path, part: str) -> subprocess.Popen[bytes]:
    """The runner (djangosuite_runner.py) on `part` of `suite`, against the server at `url`
    (a database of its own: each part starts by emptying it)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(suite.root), str(ROOT / "src"), str(ROOT / "tests")])
    return subprocess.Popen(
        [
            suite.python,
            str(ROOT / "tests" / "djangosuite_runner.py"),
            str(suite.tests_dir),
            url,
            str(out),
            part,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


# The table of docs/django.md's section "Django's tests that cannot pass":
# | `RedisCacheTests.test_x` | 5.2, 6.1 | why |
_ROW = re.compile(r"^\|\s*`(\w+\.\w+)`\s*\|\s*([\d., ]+)\|")


def cannot_pass(series: str) -> set[str]:
    """The Django tests docs/django.md lists as unable to pass on `series`."""
    text = (ROOT / "docs" / "django.md").read_text()
    section = text.split("## Django's tests that cannot pass", 1)[1].split("\n## ", 1)[0]
    listed = set()
    for line in section.splitlines():
        match = _ROW.match(line)
        if match and series in [s.strip() for s in match.group(2).split(",")]:
            listed.add(match.group(1))
    return listed
