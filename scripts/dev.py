#!/usr/bin/env python3
"""The README's commands: set up a virtualenv, then run the demo, the whole check or the
benchmarks.

    python3 scripts/dev.py demo    seawall demo on the embedded server (installs only what
                                   the demo needs)
    python3 scripts/dev.py test    unasync check, ruff check and format --check, mypy --strict,
                                   then the test suite
    python3 scripts/dev.py bench   every benchmark, 3 runs each, medians (bench/run_all.py;
                                   arguments go to it: --quick, --runs N, --only NAME ...)
    python3 scripts/dev.py soak NAME   a long run kept out of the test command (`soak`
                                   alone lists them: sqla, the QueryCache's differential test;
                                   follow, the follower's chaos test)

Needs only Python 3.11+: the virtualenv (.venv) gets seawall with its `server` extra (an
embedded valkey-server binary) and the dev tools from the package index (`bench` adds the
`bench` extra: the libraries compared). Re-runs skip the install while pyproject.toml is
unchanged.
"""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / "python"
# What `test` installs; `bench` adds its own extra.
EXTRAS = "server,dev,hiredis"
# What `demo` installs: the embedded server and the parser, none of the dev tools (a
# fresh clone runs the demo in well under a minute). DATABASE_URL, when it names a server
# for the demo's stampede, adds that database's extra.
DEMO_EXTRAS = "server,hiredis"


# pytest-xdist workers, each with its own servers on free ports. The tests mostly wait
# on servers, subprocesses, peers' suites and leases (a whole run keeps 2 cores 39 %
# busy), so 3 workers on 2 cores: the parallel phase took 357 s against 476 s with 2.
# 4 workers took 375-429 s against 496 s with 3 on a slower machine, but there timing
# bounds of the parallel phase (a frozen Cluster's recovery, a stampede's overlap, a
# warning's delay) failed in one run of three: not worth the minute.
# Tests whose timing bounds need the machine to themselves are marked serial and run
# alone afterwards. "worksteal" rebalances the long tail. Extra arguments come after
# these, so `dev.py test -n 0` runs serially.
PYTEST_PARALLEL = ["-n", "3", "--dist", "worksteal"]
# pytest's exit status when it collected or selected no test: a run that proved nothing.
PYTEST_NO_TESTS = 5


# Servers some tests start privately on free 127.0.0.1 ports, besides Redis/Valkey (which
# comes in a wheel): what each needs on the machine, and the Debian package that has it.
# (name, any of these paths or commands, Debian packages)
SERVERS = [
    ("PostgreSQL (seawall follow)", ["pg_ctl", "/usr/lib/postgresql/*/bin/pg_ctl"], ["postgresql"]),
    ("MariaDB (seawall follow)", ["mariadbd", "/usr/sbin/mariadbd"], ["mariadb-server"]),
    ("etcd (seawall.etcd)", ["etcd", "/usr/bin/etcd"], ["etcd-server"]),
    (
        "ZooKeeper (seawall.zookeeper)",
        ["/usr/share/java/zookeeper.jar", "/usr/share/zookeeper/zookeeper.jar"],
        ["zookeeper", "default-jre-headless"],
    ),
    ("Chromium (the sessions browser tests)", ["chromium", "/usr/bin/chromium"], ["chromium"]),
    ("ChromeDriver", ["chromedriver", "/usr/bin/chromedriver"], ["chromium-driver"]),
]
# The ones benchmarks start (bench/cdc.py, cp_locks.py, orm.py, sink.py): no browser.
BENCH_SERVERS = SERVERS[:4]


def _present(candidates: list[str]) -> bool:
    for candidate in candidates:
        if "/" in candidate:
            if glob.glob(candidate):
                return True
        elif shutil.which(candidate):
            return True
    return False


def ensure_servers(
    servers: list[tuple[str, list[str], list[str]]] = SERVERS, users: str = "tests"
) -> None:
    """Install the Debian packages of missing servers when this is root on Debian/Ubuntu
    (as CI is); otherwise say which are missing: the `users` that need one fail naming it."""
    missing = [(name, packages) for name, paths, packages in servers if not _present(paths)]
    if not missing:
        return
    packages = sorted({package for _, group in missing for package in group})
    names = ", ".join(name for name, _ in missing)
    command = ["apt-get", "install", "-y", "--no-install-recommends", *packages]
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        print(
            f"\nnot found: {names}; the {users} that need them will fail. Install them with:"
            f"\n    sudo {' '.join(command)}",
            flush=True,
        )
        return
    step(f"installing {names}: {' '.join(packages)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for args in (["apt-get", "update", "-qq"], command):
        code = subprocess.call(args, env=env, stdin=subprocess.DEVNULL)
        if code:
            print(
                f"`{' '.join(args)}` failed (exit {code}); the {users} that need {names} will fail",
                flush=True,
            )
            return


def step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def run(*args: str | Path) -> int:
    return subprocess.call([str(a) for a in args], cwd=ROOT)


def ensure_venv(extras: str = EXTRAS) -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - this script may run on an older python3
        sys.exit(f"seawall needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    wanted = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    # One stamp per set of extras: `bench` after `test` installs its extra once, and
    # `test` after `bench` finds its own stamp still good.
    stamp = VENV / (".seawall-installed" + ("" if extras == EXTRAS else "-" + extras))
    if PYTHON.exists() and any(
        _stamp_extras(done) >= set(extras.split(",")) and done.read_text() == wanted
        for done in VENV.glob(".seawall-installed*")
    ):
        return  # these extras, or more, are installed for this pyproject.toml
    if not PYTHON.exists():
        step(f"creating {VENV}")
        try:
            venv.EnvBuilder(with_pip=True).create(VENV)
        except Exception as exc:  # Debian's python3 without python3-venv lacks ensurepip
            sys.exit(
                f"could not create a virtualenv ({exc}); on Debian/Ubuntu install it with "
                "`apt install python3-venv`, then run this command again"
            )
    step(f"installing seawall[{extras}] into .venv")
    code = run(
        PYTHON,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "-e",
        f".[{extras}]",
    )
    if code:
        sys.exit(f"pip install failed (exit {code})")
    stamp.write_text(wanted)


def _stamp_extras(stamp: Path) -> set[str]:
    suffix = stamp.name.removeprefix(".seawall-installed")
    return set((suffix[1:] if suffix else EXTRAS).split(","))


def compile_sources(*folders: str) -> None:
    """Byte-compile `folders` once, for every process that imports from them. The demo's
    and the tests' processes (hundreds: workers, followers, CLI runs) would each compile
    seawall again where PYTHONDONTWRITEBYTECODE is set, as it is on some machines: 0.35
    CPU-seconds a process. Python reads compiled files whatever that variable says."""
    run(PYTHON, "-m", "compileall", "-q", "-j", "0", *folders)


def demo(extra: list[str]) -> int:
    database = os.environ.get("DATABASE_URL", "")
    driver = next((x for x in ("postgresql", "mysql") if database.startswith(x)), None)
    ensure_venv(DEMO_EXTRAS + (f",{driver}" if driver else ""))
    compile_sources("src")
    return run(BIN / "seawall", "demo", *extra)


def _serial_files() -> list[str]:
    """The test files that mark any test `serial` (pytest.mark.serial)."""
    return sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if "mark.serial" in path.read_text()
    )


def test(extra: list[str]) -> int:
    ensure_venv()
    ensure_servers()
    started = time.monotonic()
    compile_sources("src", "tests")
    # pytest keeps the test modules it rewrote (their asserts) only where bytecode may be
    # written: without it each worker and the serial phase rewrite them all again (8 of
    # the 14 CPU-seconds a collection takes). What it writes is in .gitignore.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    pytest = [PYTHON, "-m", "pytest", "-q", "--durations=15"]
    checks = [
        ("sync code generated from async code", [PYTHON, "scripts/unasync.py", "--check"]),
        ("ruff", [BIN / "ruff", "check", "src", "tests", "scripts", "bench"]),
        ("ruff format", [BIN / "ruff", "format", "--check", "src", "tests", "scripts", "bench"]),
        ("mypy --strict", [BIN / "mypy"]),
        ("tests", [*pytest, *PYTEST_PARALLEL, "-m", "not serial", *extra]),
        # Latency bounds (p99 of an invalidation) hold on their own, not beside 3 workers.
        # Only the files that mark tests serial are collected for it (collecting them all
        # again took 7 s), unless the arguments choose the tests.
        ("tests marked serial", [*pytest, "-m", "serial", *(extra or _serial_files()), "-n", "0"]),
    ]
    failed, ran_none = [], []
    for title, command in checks:
        step(title)
        code = run(*command)
        if code == PYTEST_NO_TESTS:
            ran_none.append(title)
        elif code != 0:
            failed.append(title)
    if len(ran_none) > 1:
        # One pytest phase may select nothing (`dev.py test tests/unit`); both must not.
        failed += ran_none
        print("\npytest ran no test: check the arguments (-k, paths) or the collection")
    print(f"\n== done in {time.monotonic() - started:.0f} s", flush=True)
    if failed:
        print("FAILED: " + ", ".join(failed))
        return 1
    print("all checks passed")
    return 0


def bench(extra: list[str]) -> int:
    """bench/run_all.py with the bench extra installed; the servers some benchmarks start
    (PostgreSQL, MariaDB, etcd, ZooKeeper) installed as for the tests, or named if missing."""
    ensure_venv(f"{EXTRAS},bench")
    ensure_servers(BENCH_SERVERS, "benchmarks")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    command = [str(PYTHON), str(ROOT / "bench" / "run_all.py"), *extra]
    step(" ".join(["bench/run_all.py", *extra]))
    return subprocess.call(command, cwd=ROOT, env=env)


# Long runs kept out of the test command: name -> (what it is, test file, environment).
SOAKS = {
    "sqla": (
        "the QueryCache's differential test, 10,000 operations a seed (SEAWALL_DIFF_OPS)",
        "tests/test_sqla_differential.py",
        {"SEAWALL_DIFF_OPS": "10000"},
    ),
    "follow": (
        "the follower's chaos test, 60 fault schedules of five faults per source",
        "tests/cdc/test_follow_chaos.py",
        {"SEAWALL_CHAOS_SCHEDULES": "60", "SEAWALL_CHAOS_FAULTS": "5"},
    ),
}


def soak(extra: list[str]) -> int:
    """`soak NAME [pytest arguments]`: one long run (see SOAKS); DATABASE_URL adds the
    database it names, as for the tests."""
    if not extra or extra[0] not in SOAKS:
        print("soaks: " + "; ".join(f"{name}: {what}" for name, (what, _, _) in SOAKS.items()))
        return 2
    what, path, env = SOAKS[extra[0]]
    ensure_venv()
    step(what)
    command = [str(PYTHON), "-m", "pytest", "-q", "-n", "0", path, *extra[1:]]
    return subprocess.call(command, cwd=ROOT, env={**os.environ, **env})


def main(argv: list[str]) -> int:
    commands = {"demo": demo, "test": test, "bench": bench, "soak": soak}
    if not argv or argv[0] not in commands:
        print(__doc__)
        return 2
    return commands[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
