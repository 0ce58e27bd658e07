"""Run every benchmark several times (3 by default) and print the median of each figure.

Each run is a fresh process with its own server (`seawall.server()`). A figure in the
final tables is the median over the runs of that run's figure; a ratio is the median of
the per-run ratios, each measured side by side within one run.

    PYTHONPATH=src .venv/bin/python bench/run_all.py [--quick] [--runs N] [--markdown]
        [--only NAME ...] [--keep DIR]
    PYTHONPATH=src .venv/bin/python bench/run_all.py --report DIR [--markdown]
        (print the medians of runs kept earlier with --keep DIR, without running anything)
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from _harness import Table, format_goals, format_table, machine_note, median_table

HERE = Path(__file__).resolve().parent
BENCHMARKS = [
    "lock_uncontended",
    "lock_handover",
    "lock_contended",
    "rlock",
    "bloom",
    "rwlock",
    "semaphore",
    "cache_stampede",
    "redlock",
    "stock",
    "sink",
    "cache_stale",
    "cache_hits",
    "cache_pool",
    "ops",
]


def run_once(name: str, quick: bool, out: Path, log: Path) -> Table:
    command = [sys.executable, str(HERE / f"{name}.py"), "--json", str(out)]
    if quick:
        command.append("--quick")
    with log.open("w") as sink:
        done = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        sys.exit(f"{name} failed (exit {done.returncode}); its output is in {log}")
    table: Table = json.loads(out.read_text())["table"]
    return table


def report(module: ModuleType, name: str, tables: list[Table], markdown: bool) -> None:
    merged = median_table(tables)
    print(f"\n## {name}: median of {len(tables)} runs\n")
    print(format_table(module.COLUMNS, merged, first=module.FIRST, markdown=markdown))
    headline = next(c for c in module.COLUMNS if c.key == module.HEADLINE)
    print(f"\n{headline.title} in each run:")
    for contender in merged:
        values = [format(t[contender][module.HEADLINE], headline.fmt) for t in tables]
        print(f"  {contender}: {', '.join(values)}")
    print("\nGoals (on the medians):\n" + format_goals(module.GOALS, merged))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each benchmark")
    parser.add_argument("--quick", action="store_true", help="pass --quick to each benchmark")
    parser.add_argument("--markdown", action="store_true", help="print tables as markdown")
    parser.add_argument("--only", nargs="+", choices=BENCHMARKS, default=BENCHMARKS)
    parser.add_argument("--keep", type=Path, help="keep each run's JSON and output here")
    parser.add_argument("--report", type=Path, metavar="DIR", help="report runs kept in DIR")
    args = parser.parse_args()
    if args.report:
        for name in args.only:
            paths = sorted(args.report.glob(f"{name}-*.json"))
            if paths:
                tables = [json.loads(path.read_text())["table"] for path in paths]
                report(importlib.import_module(name), name, tables, args.markdown)
        return

    print(
        f"run_all: {machine_note()}; {args.runs} runs of {', '.join(args.only)}"
        + (" (quick)" if args.quick else "")
    )
    with tempfile.TemporaryDirectory(prefix="seawall-bench-") as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        results: dict[str, list[Table]] = {}
        for name in args.only:
            results[name] = []
            for run in range(1, args.runs + 1):
                started = time.monotonic()
                out, log = folder / f"{name}-{run}.json", folder / f"{name}-{run}.log"
                results[name].append(run_once(name, args.quick, out, log))
                print(f"  {name} run {run}/{args.runs}: {time.monotonic() - started:.0f} s")
        for name in args.only:
            report(importlib.import_module(name), name, results[name], args.markdown)
        if args.keep:
            print(f"\nEach run's JSON and full output: {args.keep}")


if __name__ == "__main__":
    main()
