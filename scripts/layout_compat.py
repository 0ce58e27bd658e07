#!/usr/bin/env python3
"""Two versions of seawall share one Redis: a process running an older commit and one running
this tree take turns on the same locks, caches, stocks, filters and message records.

    .venv/bin/python scripts/layout_compat.py [--old COMMIT]   (default: the last commit
                                                                 before the family folders)

Any change to what seawall writes in Redis (key names, hash tags, value formats, script
replies, channels) breaks a rolling upgrade, where old and new processes run side by side.
This runs every step twice, old then new and new then old, on a private server, and prints
each step with what each side saw; it exits 1 at the first disagreement. Only the public
API is used, so the same steps run on both versions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The last commit whose modules sat at the package root (_async/, _sync/, lua/).
BEFORE_FAMILY_FOLDERS = "94027c2"

# A process that runs the snippets it reads (one JSON string a line) in one namespace and
# answers each with the repr of `out`, or the exception it raised.
WORKER = textwrap.dedent(
    """
    import json, sys, time, redis, seawall
    space = {"seawall": seawall, "time": time, "r": redis.Redis.from_url(sys.argv[1])}
    print(json.dumps(seawall.__file__), flush=True)
    for line in sys.stdin:
        space["out"] = None
        try:
            exec(json.loads(line), space)
            answer = repr(space["out"])
        except Exception as exc:
            answer = f"raised {type(exc).__name__}: {exc}"
        print(json.dumps(answer), flush=True)
    """
)


class Side:
    def __init__(self, label: str, src: Path, url: str) -> None:
        self.label = label
        env = {**os.environ, "PYTHONPATH": str(src)}
        self.process = subprocess.Popen(
            [sys.executable, "-c", WORKER, url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.file = self._read()

    def _read(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.label} process ended (exit {self.process.wait()})")
        answer: str = json.loads(line)
        return answer

    def run(self, code: str) -> str:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(textwrap.dedent(code)) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


# What each side makes at the start of a round; {n}, the round's number, keeps rounds apart.
SETUP = """
L = seawall.Lock(r, "c{n}:lock", ttl=30.0)
R = seawall.RLock(r, "c{n}:rlock")
S1, S2 = (seawall.Semaphore(r, "c{n}:sem", value=2) for _ in range(2))
W = seawall.RWLock(r, "c{n}:rw")
C = seawall.Cache(r, "c{n}", ttl=600.0, l1_ttl=60.0)
T = seawall.Stock(r, "c{n}:sku")
B = seawall.BloomFilter(r, "c{n}:ids", capacity=1000, error_rate=0.01)
I = seawall.Idempotent(r, "c{n}:pay")
"""

# (who, code, expected repr of `out`): "first" and "second" name the two sides of a round.
STEPS: list[tuple[str, str, str]] = [
    # Lock: one holder across versions; the fence keeps increasing.
    ("first", "out = L.acquire(); f1 = L.fence", "True"),
    ("second", "out = (L.acquire(blocking=False), L.locked())", "(False, True)"),
    ("first", "L.release(); out = L.locked()", "False"),
    ("second", "out = L.acquire(timeout=5.0); f2 = L.fence", "True"),
    ("first", "out = L.acquire(blocking=False)", "False"),
    ("second", "L.release(); out = True", "True"),
    ("first", "L.acquire(); out = L.fence > f1 + 1; L.release()", "True"),
    # RLock: the same owner may take it again; the other side may not.
    ("first", "R.acquire(); out = R.acquire()", "True"),
    ("second", "out = R.acquire(blocking=False)", "False"),
    ("first", "R.release(); R.release(); out = R.locked()", "False"),
    ("second", "out = R.acquire(blocking=False); R.release()", "True"),
    # Semaphore: at most `value` holders, counted across versions.
    ("first", "out = (S1.acquire(), S2.acquire())", "(True, True)"),
    ("second", "out = S1.acquire(blocking=False)", "False"),
    ("first", "S1.release(); out = True", "True"),
    ("second", "out = S1.acquire(timeout=5.0); S1.release()", "True"),
    ("first", "S2.release(); out = True", "True"),
    # RWLock: readers share, a writer excludes.
    ("first", "Rd = W.read(); out = Rd.acquire()", "True"),
    ("second", "out = W.write().acquire(blocking=False)", "False"),
    ("second", "Rd = W.read(); out = Rd.acquire(blocking=False); Rd.release()", "True"),
    ("first", "Rd.release(); out = True", "True"),
    ("second", "Wr = W.write(); out = Wr.acquire(timeout=5.0)", "True"),
    ("first", "out = W.read().acquire(blocking=False)", "False"),
    ("second", "Wr.release(); out = True", "True"),
    # Cache: values, loads, a delete reaching the L1 of the other side (which would keep its
    # copy for 60 s otherwise), versions, tombstones, clear().
    ("first", "C.set('k', {{'v': [1, 2]}}); out = True", "True"),
    ("second", "out = C.get('k')", "{'v': [1, 2]}"),
    ("second", "out = C.get_or_load('loaded', lambda: {{'from': 'second'}})", "{'from': 'second'}"),
    ("first", "out = C.get_or_load('loaded', lambda: 1 / 0)", "{'from': 'second'}"),
    ("first", "C.delete('k'); out = C.get('k')", "None"),
    (
        "second",
        "deadline = time.monotonic() + 2.0\n"
        "while C.get('k') is not None and time.monotonic() < deadline: time.sleep(0.01)\n"
        "out = C.get('k')",
        "None",
    ),
    ("first", "out = C.set('versioned', 'seven', version=7)", "True"),
    (
        "second",
        "out = (C.set('versioned', 'six', version=6), C.get('versioned'))",
        "(False, 'seven')",
    ),
    ("second", "C.delete('versioned', version=8); out = C.set('versioned', 7, version=7)", "False"),
    ("first", "C.set('gone', 1); C.clear(); out = C.get('gone')", "None"),
    ("second", "out = (C.get('gone'), C.get('loaded'))", "(None, None)"),
    ("second", "C.set('after', 2); out = True", "True"),
    ("first", "out = C.get('after')", "2"),
    # Stock: units, orders and retries shared.
    ("first", "T.put(10); out = T.take('o1', 3)", "True"),
    ("second", "out = (T.take('o1', 3), T.available())", "(True, 7)"),
    ("second", "out = (T.cancel('o1'), T.available())", "(True, 10)"),
    ("first", "out = (T.take('o1', 3), T.take('o2', 10), T.available())", "(False, True, 0)"),
    ("second", "out = T.take('o3', 1)", "False"),
    # Bloom filter.
    ("first", "B.create(); out = B.add_many(['a', 'b'])", "[True, True]"),
    ("second", "out = (B.might_contain('a'), B.might_contain('b'))", "(True, True)"),
    # Idempotent: a message handled by one side is not handled again by the other.
    ("first", "out = I.run('m1', lambda: 'paid')", "'paid'"),
    ("second", "out = I.run('m1', lambda: 1 / 0)", "'paid'"),
]


def export(commit: str, into: Path) -> Path:
    """The `src/` of `commit`, unpacked into `into`."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, "src"], cwd=ROOT, capture_output=True
    )
    if archive.returncode:
        raise SystemExit(f"git archive {commit}: {archive.stderr.decode().strip()}")
    tar_path = into / "src.tar"
    tar_path.write_bytes(archive.stdout)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", default=BEFORE_FAMILY_FOLDERS, help="the older commit")
    options = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    import seawall

    with tempfile.TemporaryDirectory() as tmp, seawall.server() as url:
        old_src = export(options.old, Path(tmp))
        sides = {"old": Side("old", old_src, url), "new": Side("new", ROOT / "src", url)}
        print(f"old: {sides['old'].file}\nnew: {sides['new'].file}\nserver: {url}")
        failures = 0
        try:
            for number, (first, second) in enumerate((("old", "new"), ("new", "old"))):
                print(f"\nround {number + 1}: {first} first, then {second}")
                for side in sides.values():
                    if (answer := side.run(SETUP.format(n=number))) != "None":
                        raise SystemExit(f"{side.label}: the set-up {answer}")
                for who, code, expected in STEPS:
                    side = sides[first if who == "first" else second]
                    answer = side.run(code.format(n=number))
                    mark = "ok " if answer == expected else "BAD"
                    failures += answer != expected
                    shown = code.format(n=number).replace("\n", "; ")
                    print(f"  {mark} {side.label}: {shown[:88]:88} -> {answer}")
                    if answer != expected:
                        print(f"      expected {expected}")
        finally:
            for side in sides.values():
                side.close()
    print(f"\n{2 * len(STEPS) - failures} steps agree, {failures} disagree")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
