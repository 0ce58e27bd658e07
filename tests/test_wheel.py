"""The wheel users install ships every family's Lua scripts: built from this tree, installed
apart from the source, it runs a lock, a cache, a stock and a Bloom filter."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import Target

import seawall

ROOT = Path(__file__).resolve().parent.parent
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check"]

SCRIPT = """
import sys, redis, seawall
assert seawall.__file__.startswith(sys.argv[2]), seawall.__file__
r = redis.Redis.from_url(sys.argv[1])
with seawall.Lock(r, "wheel:lock", ttl=5.0) as lock:
    assert lock.fence > 0
with seawall.Semaphore(r, "wheel:sem", value=2), seawall.RWLock(r, "wheel:rw").read():
    pass
cache = seawall.Cache(r, "wheel", ttl=60.0)
assert cache.get_or_load("k", lambda: {"v": 1}) == {"v": 1}
cache.set("k", {"v": 2})
assert cache.get("k") == {"v": 2}
stock = seawall.Stock(r, "wheel:sku")
stock.put(3)
assert stock.take("o1", 2) and stock.available() == 1
ids = seawall.BloomFilter(r, "wheel:ids", capacity=100, error_rate=0.01)
ids.create()
ids.add("a")
assert ids.might_contain("a")
print("ran from the wheel")
"""


def test_the_wheel_ships_every_script_and_runs_from_an_install(
    tmp_path: Path, standalone: Target
) -> None:
    built = subprocess.run(
        [*PIP, "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("seawall-*.whl")
    source = Path(seawall.__file__).parent
    wanted = {f"seawall/{p.relative_to(source).as_posix()}" for p in source.rglob("*.lua")}
    assert len(wanted) > 40
    assert wanted <= set(zipfile.ZipFile(wheel).namelist())

    site = tmp_path / "site"
    installed = subprocess.run(
        [*PIP, "install", "--no-deps", "--no-compile", "-q", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    # The installed copy comes first on the path, before the source tree's editable install;
    # redis-py and the other dependencies come from this environment.
    env = {**os.environ, "PYTHONPATH": str(site)}
    ran = subprocess.run(
        [sys.executable, "-c", SCRIPT, standalone.url, str(site)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "ran from the wheel"
