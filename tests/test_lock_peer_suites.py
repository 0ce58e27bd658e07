"""CPython's and redis-py's own lock tests, unchanged, against seawall's locks.

lockpeers.py fetches and starts them (CPython's `test.lock_tests` in three processes,
redis-py's tests/test_lock.py and tests/test_asyncio/test_lock.py in one), all at once, on
private servers. Every failure must be listed, with its reason, in docs/lock-compat.md;
a listed test that passes fails this test too, so the lists never go stale (except one
whose reason says it passes on some runs: lockpeers.TIMING_MARK).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import lockpeers
import pytest

from seawall.errors import ServerNotFoundError
from seawall.launcher import ServerProcess

# CPython 3.11's four classes hold 60 tests, redis-py 8's two files 92 runs: far fewer
# means they were not found.
CPYTHON_AT_LEAST = 50
REDISPY_AT_LEAST = 70
# Each process ends well within this; a hang must not eat the whole suite's time.
PROCESS_TIMEOUT = 60


def _collect(process: subprocess.Popen[str], out: Path, what: str) -> dict[str, list[str]]:
    try:
        output = process.communicate(timeout=PROCESS_TIMEOUT)[0]
    except subprocess.TimeoutExpired:
        process.kill()
        output = process.communicate()[0]
        pytest.fail(f"{what} did not end within {PROCESS_TIMEOUT} s:\n{output[-3000:]}")
    if not out.exists():
        pytest.fail(f"{what} wrote no results:\n{output[-3000:]}")
    results: dict[str, list[str]] = json.loads(out.read_text())
    return results


@pytest.fixture(scope="module")
def outcomes() -> Iterator[dict[str, dict[str, list[str]]]]:
    """{"cpython": {test: [outcome, detail]}, "redis-py": {...}}: both suites, run at once."""
    try:
        lockpeers.check_cpython_tests()
        root, deps = lockpeers.prepare_redispy()
    except lockpeers.SuiteSetupError as exc:
        pytest.fail(f"cannot set up the lock suites: {exc}", pytrace=False)
    # A server per suite: redis-py's fixtures empty every database after each test.
    servers: list[ServerProcess] = []
    try:
        for _ in range(2):
            servers.append(ServerProcess().start())
        yield _run_all(root, deps, servers[0].url, servers[1].url)
    except ServerNotFoundError as exc:
        pytest.fail(f"seawall cannot start a test server: {exc}", pytrace=False)
    finally:
        for server in servers:
            server.stop()


def _run_all(
    root: Path, deps: Path, cpython_url: str, redispy_url: str
) -> dict[str, dict[str, list[str]]]:
    lockpeers.CACHE.mkdir(parents=True, exist_ok=True)
    runs = []
    for number, classes in enumerate(lockpeers.CPYTHON_GROUPS):
        out = lockpeers.CACHE / f"cpython-{number}.json"
        runs.append(("cpython", out, lockpeers.start_cpython(cpython_url, classes, out)))
    out = lockpeers.CACHE / "redis-py.json"
    runs.append(("redis-py", out, lockpeers.start_redispy(root, deps, redispy_url, out)))
    results: dict[str, dict[str, list[str]]] = {"cpython": {}, "redis-py": {}}
    for suite, out, process in runs:
        results[suite].update(_collect(process, out, f"{suite}'s lock tests"))
    return results


def _check(
    ran: dict[str, list[str]], section: str, at_least: int, name: Callable[[str], str]
) -> str:
    listed = lockpeers.cannot_pass(section)
    failed: dict[str, str] = {}
    passed: set[str] = set()
    for test, (outcome, detail) in ran.items():
        if outcome == "passed":
            passed.add(name(test))
        else:
            failed.setdefault(name(test), f"{outcome}: {detail}")
    problems = [
        f"{test} failed, unlisted:\n{why}" for test, why in failed.items() if test not in listed
    ]
    problems += [
        f"{test} passes: remove it from docs/lock-compat.md ({section})"
        for test in sorted(listed & passed - set(failed) - lockpeers.may_pass(section))
    ]
    problems += [
        f"{test} is listed but did not run" for test in sorted(listed - passed - set(failed))
    ]
    if len(ran) < at_least:
        problems.append(f"only {len(ran)} tests ran")
    assert not problems, "\n".join(problems)
    return f"{len(ran)} ran, {len(ran) - sum(o != 'passed' for o, _ in ran.values())} passed"


def test_cpythons_own_lock_tests_pass(outcomes: dict[str, dict[str, list[str]]]) -> None:
    summary = _check(
        outcomes["cpython"], lockpeers.CPYTHON_SECTION, CPYTHON_AT_LEAST, lambda test: test
    )
    print(f"CPython's lock tests: {summary}")


def test_redis_pys_own_lock_tests_pass(outcomes: dict[str, dict[str, list[str]]]) -> None:
    summary = _check(
        outcomes["redis-py"], lockpeers.REDISPY_SECTION, REDISPY_AT_LEAST, lockpeers.plain_name
    )
    print(f"redis-py's lock tests: {summary}")


def test_each_listed_difference_gives_its_reason() -> None:
    for section in (lockpeers.CPYTHON_SECTION, lockpeers.REDISPY_SECTION):
        rows = lockpeers.table(section)
        assert rows, f"docs/lock-compat.md lists no test under {section!r}, or its format changed"
        for test, why in rows.items():
            assert len(why) > 30, f"{test}: no reason given in docs/lock-compat.md"
