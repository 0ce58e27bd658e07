"""`seawall lint` speed: this tree against the linter before its project index, on the
same code in one run, and a function of 300 Redis calls in one loop.

Input: the packages installed beside seawall that talk to Redis or are large Python code
bases (redis-py, Django, SQLAlchemy, kazoo, httpx and seawall itself), copied from this
virtualenv into a temporary folder (so no default exclusion of site-packages applies, and
both versions take the same command line); every contender checks the same files, in turns (order
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
import shutil
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
    Column("loop_s", "loop s", ".3f"),
]
HEADLINE = "seconds"
FIRST = "contender"
GOALS = [
    Goal(f"this tree at least as fast as {BASELINE} on the same code", NOW, "x_before", "<=", 1.0),
    Goal("a 300-call loop in well under a second (< 0.5 s)", LOOP, "loop_s", "<=", 0.5),
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


def _copy(paths: list[str], into: Path) -> list[str]:
    copies = []
    for path in paths:
        target = into / "input" / Path(path).name
        shutil.copytree(path, target, ignore=shutil.ignore_patterns("__pycache__"))
        copies.append(str(target))
    return copies


def _run(src: Path, paths: list[str]) -> float:
    env = dict(os.environ, PYTHONPATH=str(src))
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "seawall", "lint", *paths],
        capture_output=True, text=True, env=env, check=False, cwd=Path(paths[0]).parent,
    )  # fmt: skip
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"seawall lint from {src} failed:\n{done.stderr[-2000:]}")
    return took


def _lint_in_process(path: Path) -> float:
    """Seconds this tree's linter takes on one file, in this process (no start-up)."""
    from seawall.lint import lint_source

    source = path.read_text()
    started = time.perf_counter()
    findings = lint_source(source, str(path))
    took = time.perf_counter() - started
    assert findings, "the loop's commands were not seen"
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
        paths = _copy(paths, Path(tmp))
        for index in range(args.passes):
            order = [(NOW, SRC), (BEFORE, before)]
            for name, src in order if index % 2 == 0 else order[::-1]:
                times[name].append(_run(src, paths))
            done = ", ".join(f"{n} {t[-1]:.2f} s" for n, t in times.items())
            print(f"  pass {index + 1}: {done}")
        loop = _loop_file(Path(tmp))
        loop_times = [_lint_in_process(loop) for _ in range(args.passes)]
    now = median(times[NOW])
    table: Table = {
        NOW: {
            "seconds": now,
            "lines_per_s": lines / now,
            "x_before": median([a / b for a, b in zip(times[NOW], times[BEFORE], strict=True)]),
        },
        BEFORE: {"seconds": median(times[BEFORE]), "lines_per_s": lines / median(times[BEFORE])},
        LOOP: {"loop_s": median(loop_times)},
    }
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "lint", table, {"lines": lines, "passes": args.passes})


if __name__ == "__main__":
    main()
