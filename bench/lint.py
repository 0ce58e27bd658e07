"""`seawall lint` speed: this tree against the linter before its project index, on the
same code in one run, and a function of 300 Redis calls in one loop.

Input: the packages installed beside seawall that talk to Redis or are large Python code
bases (redis-py, Django, SQLAlchemy, kazoo, httpx and seawall itself), read from this
virtualenv's site-packages; every contender checks the same files, in turns (order
reversed every pass), as a separate process, so a time includes start-up. The earlier
linter is seawall's source at BASELINE (before the index pass), exported from git into a
temporary folder: `git archive BASELINE src` (a clean clone has the history).

The loop: one file with one `for` loop sending 300 different commands per iteration (the
shape SW006 once took quadratic time on: 20.9 s at 300 calls).

    PYTHONPATH=src .venv/bin/python bench/lint.py [--quick] [--passes 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from _harness import (
    Column,
    Goal,
    Table,
    format_goals,
    format_table,
    machine_note,
    median,
    parse_args,
    write_json,
)

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
# The last commit before the two-pass linter (the project index) landed.
BASELINE = "7ba7c6b"
PACKAGES = ["redis", "django", "sqlalchemy", "kazoo", "httpx", "seawall"]
NOW = "seawall lint (this tree)"
BEFORE = f"seawall lint at {BASELINE}"
LOOP = "300 calls in one loop"

COLUMNS = [
    Column("seconds", "seconds", ".2f"),
    Column("lines_per_s", "lines/s", ",.0f"),
    Column("x_before", f"x {BASELINE}", ".2f"),
]
HEADLINE = "seconds"
FIRST = "contender"
GOALS = [
    Goal(f"this tree at least as fast as {BASELINE} on the same code", NOW, "x_before", "<=", 1.0),
    Goal("a 300-call loop in well under a second (< 0.5 s)", LOOP, "seconds", "<=", 0.5),
]


def _package_dirs(quick: bool) -> list[str]:
    found = []
    for name in PACKAGES[:2] if quick else PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            found.extend(spec.submodule_search_locations)
    return found


def _lines(paths: list[str]) -> int:
    total = 0
    for path in paths:
        for folder, _, files in os.walk(path):
            for name in files:
                if name.endswith(".py"):
                    with open(os.path.join(folder, name), "rb") as handle:
                        total += handle.read().count(b"\n")
    return total


def _export_baseline(into: Path) -> Path:
    archive = into / "baseline.tar"
    with open(archive, "wb") as handle:
        subprocess.run(["git", "archive", BASELINE, "src"], cwd=ROOT, stdout=handle, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _run(src: Path, paths: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=str(src))
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "seawall", "lint", "--isolated", "--exclude", "tests", *paths],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"seawall lint from {src} failed:\n{done.stderr[-2000:]}")
    return took


def _loop_file(folder: Path) -> Path:
    commands = ["get", "set", "incr", "hget", "sadd", "zadd", "lpush", "expire", "ttl", "exists"]
    body = "\n".join(
        f"        r.{commands[i % len(commands)]}(f'k{i}:{{item}}', {i})" for i in range(300)
    )
    path = folder / "loop.py"
    path.write_text(
        "import redis\n\nr = redis.Redis(socket_timeout=1.0)\n\n\n"
        f"def work(items):\n    for item in items:\n{body}\n"
    )
    return path


def main() -> None:
    def extra(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--passes", type=int, default=3)

    args = parse_args(__doc__.splitlines()[0], extra)
    paths = _package_dirs(args.quick)
    lines = _lines(paths)
    print(machine_note())
    print(f"{lines:,} lines in {', '.join(paths)}; {args.passes} passes")
    times: dict[str, list[float]] = {NOW: [], BEFORE: []}
    with tempfile.TemporaryDirectory() as tmp:
        before = _export_baseline(Path(tmp))
        for index in range(args.passes):
            order = [(NOW, SRC), (BEFORE, before)]
            for name, src in order if index % 2 == 0 else order[::-1]:
                times[name].append(_run(src, paths))
            done = ", ".join(f"{n} {t[-1]:.2f} s" for n, t in times.items())
            print(f"  pass {index + 1}: {done}")
        loop = _loop_file(Path(tmp))
        # The file alone: start-up is measured by a run on an empty file and taken off.
        empty = Path(tmp) / "empty.py"
        empty.write_text("")
        start_up = median([_run(SRC, [str(empty)]) for _ in range(args.passes)])
        loop_times = [_run(SRC, [str(loop)]) - start_up for _ in range(args.passes)]
    now = median(times[NOW])
    table: Table = {
        NOW: {
            "seconds": now,
            "lines_per_s": lines / now,
            "x_before": median([a / b for a, b in zip(times[NOW], times[BEFORE], strict=True)]),
        },
        BEFORE: {"seconds": median(times[BEFORE]), "lines_per_s": lines / median(times[BEFORE])},
        LOOP: {"seconds": max(0.0, median(loop_times))},
    }
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "lint", table, {"lines": lines, "passes": args.passes})


if __name__ == "__main__":
    main()
