"""seawall[sqlalchemy] as users install it: built from this tree and installed alone in a
fresh virtual environment, the docs' quick start runs as written and AsyncQueryCache is
usable; without greenlet the sync QueryCache still runs and AsyncQueryCache names what to
install. The docs' AsyncSession example runs here, on the private PostgreSQL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from seawall.launcher._binary import find_server_binary

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "sqlalchemy.md"


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)


ASYNCIO_USABLE = """
import redis.asyncio
from sqlalchemy.ext.asyncio import async_sessionmaker
from seawall.sqlalchemy import AsyncQueryCache
AsyncQueryCache(redis.asyncio.Redis(), "shop").attach(async_sessionmaker())
print("asyncio usable")
"""

WITHOUT_GREENLET = """
from seawall.sqlalchemy import AsyncQueryCache, QueryCache
try:
    AsyncQueryCache(None, "shop")
except ImportError as exc:
    assert "pip install 'seawall[sqlalchemy]'" in str(exc), exc
    print("asyncio names its install")
"""


def run(python: Path, code: str, cwd: Path, env: dict[str, str]) -> str:
    ran = subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


@pytest.mark.slow
def test_the_extra_alone_runs_the_docs(tmp_path: Path) -> None:
    wheel_args = ["wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path)]
    built = subprocess.run(
        [sys.executable, "-m", "pip", *wheel_args, str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("seawall-*.whl")
    home = tmp_path / "venv"
    # A fresh environment with only the wheel and what it asks for. Its packages come
    # from this environment's pip (--python), as a user's pip puts them there: a pip of
    # its own (ensurepip) and the byte-compiling of every file would double the time.
    venv.create(home, with_pip=False)
    python = home / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    pip += ["-q", "--no-input"]
    installed = subprocess.run(
        [*pip, "install", "--no-compile", f"{wheel}[sqlalchemy]"], capture_output=True
    )
    assert installed.returncode == 0, installed.stderr
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))},
        "SEAWALL_SERVER_BIN": find_server_binary().path,
    }
    assert run(python, ASYNCIO_USABLE, tmp_path, env).strip() == "asyncio usable"
    removed = subprocess.run([*pip, "uninstall", "-y", "greenlet"], capture_output=True)
    assert removed.returncode == 0, removed.stderr
    printed = run(python, examples()[0], tmp_path, env)  # the quick start, as written
    assert printed.split() == ["ann@example.com", "None"], "the sync cache needs no greenlet"
    assert run(python, WITHOUT_GREENLET, tmp_path, env).strip() == "asyncio names its install"


def test_the_asyncio_example_runs(pg_url: str, tmp_path: Path) -> None:
    """Both examples as one program (the second continues the first), on this
    environment's drivers, with the asyncio one's database URL pointed at the test's."""
    quick_start, asyncio_example = examples()
    url = pg_url.replace("+psycopg", "+psycopg_async")
    asyncio_example = asyncio_example.replace('"postgresql+psycopg_async://app@db/shop"', repr(url))
    assert repr(url) in asyncio_example
    env = {**os.environ, "SEAWALL_SERVER_BIN": find_server_binary().path}
    run(Path(sys.executable), quick_start + asyncio_example, tmp_path, env)
