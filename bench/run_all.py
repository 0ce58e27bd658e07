"""Run every benchmark several times (3 by default) and print the median of each figure.

Every bench/*.py but the helpers (_*.py) and this script is a benchmark, and each follows
one protocol: `--json PATH` writes its table, `--quick` makes a short run, and the module
names its COLUMNS, HEADLINE, FIRST and GOALS (checked before anything runs, so a new
benchmark cannot be left out quietly). Each run is a fresh process with its own servers
(Redis from `seawall.server()`; PostgreSQL, MariaDB, etcd and ZooKeeper from
seawall.launcher, for the benchmarks that need them: one that cannot start its server
fails saying what to install). A figure in the final tables is the median over the runs
of that run's figure; a ratio is the median of the per-run ratios, each measured side by
side within one run. A benchmark that fails has the end of its output printed, the others
still run, and the exit status is 1.

    PYTHONPATH=src .venv/bin/python bench/run_all.py [--quick] [--runs N] [--markdown]
        [--only NAME ...] [--keep DIR]
    PYTHONPATH=src .venv/bin/python bench/run_all.py --report DIR [--markdown]
        (print the medians of runs kept earlier with --keep DIR, without running anything)
    python3 scripts/dev.py bench [the same arguments]   (installs the bench extra first)
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
# What a benchmark module must define for the report (see _harness.py).
PROTOCOL = ("COLUMNS", "HEADLINE", "FIRST", "GOALS")
# Lines of a failed run's output printed with the failure.
TAIL = 25


def discover() -> list[str]:
    """Every benchmark in bench/, by name."""
    return sorted(
        path.stem
        for path in HERE.glob("*.py")
        if not path.stem.startswith("_") and path.stem != "run_all"
    )


def load(name: str) -> ModuleType:
    """The benchmark's module, after checking it names what the report needs."""
    module = importlib.import_module(name)
    missing = [attribute for attribute in PROTOCOL if not hasattr(module, attribute)]
    if missing:
        sys.exit(
            f"bench/{name}.py does not follow the benchmark protocol: it lacks "
            f"{', '.join(missing)} (see bench/_harness.py and bench/stock.py)"
        )
    return module


def run_once(name: str, quick: bool, out: Path, log: Path, kept: bool) -> Table | None:
    """One run's table, or None (after printing why) if the run failed."""
    command = [sys.executable, str(HERE / f"{name}.py"), "--json", str(out)]
    if quick:
        command.append("--quick")
    with log.open("w") as sink:
        done = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0 or not out.exists():
        lines = log.read_text(errors="replace").splitlines()[-TAIL:]
        where = f" (all of it: {log})" if kept else ""
        print(f"\n{name} FAILED (exit {done.returncode}); the end of its output{where}:")
        print("\n".join("    " + line for line in lines), flush=True)
        return None
    table: Table = json.loads(out.read_text())["table"]
    return table


def report(module: ModuleType, name: str, tables: list[Table], markdown: bool) -> None:
    merged = median_table(tables)
    print(f"\n## {name}: median of {len(tables)} runs\n")
    print(format_table(module.COLUMNS, merged, first=module.FIRST, markdown=markdown))
    headline = next(c for c in module.COLUMNS if c.key == module.HEADLINE)
    print(f"\n{headline.title} in each run:")
    for contender in merged:
        values = [
            format(t[contender][module.HEADLINE], headline.fmt)
            for t in tables
            if module.HEADLINE in t.get(contender, {})
        ]
        print(f"  {contender}: {', '.join(values) or '-'}")
    print("\nGoals (on the medians):\n" + format_goals(module.GOALS, merged))


def main() -> None:
    benchmarks = discover()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each benchmark")
    parser.add_argument("--quick", action="store_true", help="pass --quick to each benchmark")
    parser.add_argument("--markdown", action="store_true", help="print tables as markdown")
    parser.add_argument("--only", nargs="+", choices=benchmarks, default=benchmarks)
    parser.add_argument("--skip", nargs="+", choices=benchmarks, default=[], help="run the rest")
    parser.add_argument("--keep", type=Path, help="keep each run's JSON and output here")
    parser.add_argument("--report", type=Path, metavar="DIR", help="report runs kept in DIR")
    args = parser.parse_args()
    names = [name for name in args.only if name not in args.skip]
    modules = {name: load(name) for name in names}
    if args.report:
        for name in names:
            paths = sorted(args.report.glob(f"{name}-*.json"))
            if paths:
                tables = [json.loads(path.read_text())["table"] for path in paths]
                report(modules[name], name, tables, args.markdown)
        return

    print(
        f"run_all: {machine_note()}; {args.runs} runs of {', '.join(names)}"
        + (" (quick)" if args.quick else ""),
        flush=True,
    )
    failed: list[str] = []
    started_all = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="seawall-bench-") as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        results: dict[str, list[Table]] = {}
        for name in names:
            results[name] = []
            for run in range(1, args.runs + 1):
                started = time.monotonic()
                out, log = folder / f"{name}-{run}.json", folder / f"{name}-{run}.log"
                out.unlink(missing_ok=True)  # a kept folder's old run must not pass for this one
                table = run_once(name, args.quick, out, log, kept=args.keep is not None)
                if table is None:
                    failed.append(name)
                    break
                results[name].append(table)
                took = time.monotonic() - started
                print(f"  {name} run {run}/{args.runs}: {took:.0f} s", flush=True)
        for name in names:
            if name not in failed:
                report(modules[name], name, results[name], args.markdown)
        if args.keep:
            print(f"\nEach run's JSON and full output: {args.keep}")
        print(f"\nrun_all: {time.monotonic() - started_all:.0f} s in all")
        if failed:
            # After the tables, so the failure is the last thing on the screen.
            print(f"FAILED: {', '.join(failed)} (the end of each one's output is above)")
            sys.exit(1)


if __name__ == "__main__":
    main()
