"""`seawall demo --quick` end to end: a real server, real worker processes, real output.

The demo is run once, as a user would run it, and its tables are read back: the unsafe
rounds must lose updates, seawall.Lock must lose none, and the frozen holder's late write
must be refused by its fence.
"""

from __future__ import annotations

import dataclasses
import fcntl
import io
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

import seawall
from seawall.demo import SCENARIOS, WORKERS, flash_sale
from seawall.demo._table import PIPE_WIDTH, Cell, Column, Style, Table, render
from seawall.demo.counter import QUICK, stall_points

SRC = Path(__file__).resolve().parents[1] / "src"
DEMO_TIMEOUT = 60.0

# The tables are read back by their cells, between the grid's vertical bars (rich draws
# `│`, or `|` where the output encoding has no box characters), whatever the padding.
# A wrapped cell continues on lines whose first cells are empty, which no pattern matches.
_BAR = r"\s*[│|]\s*"
_COUNTER_ROW = re.compile(
    rf"^{_BAR}(?P<method>no lock|SETNX\+EXPIRE|seawall\.Lock){_BAR}(?P<expected>\d+){_BAR}"
    rf"(?P<final>\d+){_BAR}(?P<lost>-?\d+){_BAR}[\d.]+ s{_BAR}"
)
_SALE_ROW = re.compile(
    rf"^{_BAR}(?P<method>read-then-decrement|WATCH/MULTI|seawall\.Lock \+ GET|seawall\.Stock)"
    rf"{_BAR}(?P<sold>\d+){_BAR}(?P<oversold>\d+){_BAR}[\d,]+{_BAR}[\d.]+ s{_BAR}"
)
_TIMELINE_ROW = re.compile(
    rf"^{_BAR}[\d.]+ s{_BAR}(?P<who>setup|[AB] \d+){_BAR}(?P<step>[^│|]+?){_BAR}"
    rf"(?P<fence>\d+){_BAR}(?P<result>[^│|]+?){_BAR}$"
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    return env


@dataclass(frozen=True)
class DemoRun:
    stdout: str
    stderr: str
    returncode: int
    elapsed: float


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoRun:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return _run_demo()
    # pytest-xdist workers share the parent of their temp dirs, one per run: the first
    # worker here runs the demo (tens of seconds), the others read its result. A worker
    # also meets this module more than once when its tests are spread among others.
    shared = tmp_path_factory.getbasetemp().parent / "demo-run.json"
    with open(shared.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if shared.exists():
            return DemoRun(**json.loads(shared.read_text()))
        run = _run_demo()
        shared.write_text(json.dumps(dataclasses.asdict(run)))
        return run


def _run_demo() -> DemoRun:
    env = _env()
    env.pop("COLUMNS", None)  # into a pipe the layout is then PIPE_WIDTH wide
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-m", "seawall", "demo", "--quick"],
        capture_output=True,
        text=True,
        env=env,
        timeout=DEMO_TIMEOUT,
    )
    return DemoRun(
        completed.stdout, completed.stderr, completed.returncode, time.monotonic() - started
    )


def _words(output: str) -> str:
    """The output's words in order, bars dropped: a notes cell wrapped over several lines
    reads as one sentence, since the cells left of it are empty on its later lines."""
    return " ".join(re.sub("[│|]", " ", output).split())


def _counter_rows(output: str) -> dict[str, tuple[int, int, int]]:
    rows = {}
    for line in output.splitlines():
        match = _COUNTER_ROW.match(line)
        if match:
            rows[match["method"]] = (
                int(match["expected"]),
                int(match["final"]),
                int(match["lost"]),
            )
    return rows


def _timeline(output: str) -> list[tuple[str, str, int, str]]:
    rows = []
    for line in output.splitlines():
        match = _TIMELINE_ROW.match(line)
        if match:
            rows.append((match["who"], match["step"], int(match["fence"]), match["result"]))
    return rows


def test_demo_exits_cleanly_within_the_time_limit(demo: DemoRun) -> None:
    assert demo.returncode == 0, demo.stderr
    assert demo.elapsed < DEMO_TIMEOUT
    assert "demo finished in" in demo.stdout
    # The server it ran on, and why that one: the embedded one unless SEAWALL_SERVER_BIN
    # names another (a redis-server on PATH does not take its place).
    explicit = os.environ.get("SEAWALL_SERVER_BIN")
    chosen = f"{explicit}, from SEAWALL_SERVER_BIN" if explicit else "the embedded valkey-server"
    assert f"server binary: {chosen}" in demo.stdout


def test_output_is_plain_and_fits_the_terminal(demo: DemoRun) -> None:
    assert "\x1b[" not in demo.stdout  # not a tty: no colour codes
    too_wide = [line for line in demo.stdout.splitlines() if len(line) > PIPE_WIDTH]
    assert not too_wide
    # One rich table per scenario, its notes column stretched to the pipe's width.
    grids = [line for line in demo.stdout.splitlines() if line.startswith("┏")]
    assert len(grids) == len(SCENARIOS)
    assert all(len(line) == PIPE_WIDTH for line in grids)


def test_unsafe_counters_lose_updates_and_seawall_lock_loses_none(demo: DemoRun) -> None:
    rows = _counter_rows(demo.stdout)
    assert set(rows) == {"no lock", "SETNX+EXPIRE", "seawall.Lock"}, demo.stdout
    increments = WORKERS * QUICK.increments
    for method, (expected, final, lost) in rows.items():
        assert expected == increments, method
        assert final + lost == expected, method
    assert rows["no lock"][2] > 0
    # The seeds' recipe: the lock expires under a stalled holder, whose late SET and DEL
    # then undo the next holder's increments.
    assert rows["SETNX+EXPIRE"][2] > 0
    assert rows["seawall.Lock"] == (increments, increments, 0)
    assert "leases lost: 0" in _words(demo.stdout)


def test_frozen_holder_is_fenced_off(demo: DemoRun) -> None:
    timeline = _timeline(demo.stdout)
    by_step = {step: (who, fence, result) for who, step, fence, result in timeline}

    a_who, a_fence, _ = by_step["acquires the lock and reads balance 100"]
    b_who, b_fence, b_result = by_step["reads 100, fenced_write 150, release()"]
    assert a_who.startswith("A ") and b_who.startswith("B ")
    assert b_fence > a_fence
    assert b_result == "accepted"

    late_who, late_fence, late_result = by_step["fenced_write 70 with its old fence"]
    assert (late_who, late_fence, late_result) == (a_who, a_fence, "rejected (False)")
    release = [row for row in timeline if row[0] == a_who and row[1] == "release()"]
    assert release == [(a_who, "release()", a_fence, "LockNotOwnedError")]

    assert "Final balance 120" in _words(demo.stdout)
    assert "WHERE id = :id AND fence < :fence" in demo.stdout


def test_flash_sale_oversells_only_without_an_atomic_take(demo: DemoRun) -> None:
    rows = {}
    for line in demo.stdout.splitlines():
        match = _SALE_ROW.match(line)
        if match:
            rows[match["method"]] = (int(match["sold"]), int(match["oversold"]))
    methods = {"read-then-decrement", "WATCH/MULTI", "seawall.Lock + GET", "seawall.Stock"}
    assert set(rows) == methods, demo.stdout
    for sold, oversold in rows.values():
        assert sold - oversold == flash_sale.UNITS
    assert rows["read-then-decrement"][1] > 0
    for method in ("WATCH/MULTI", "seawall.Lock + GET", "seawall.Stock"):
        assert rows[method] == (flash_sale.UNITS, 0), method
    assert "after the sink drained: 100 rows; books balanced" in _words(demo.stdout)


def test_stall_points_are_spread_over_the_work() -> None:
    assert stall_points(800, 1) == (266,)
    assert stall_points(2000, 2) == (500, 1000)


def _printed(table: Table, style: Style) -> str:
    out = io.StringIO()
    style.console(out).print(render(table, number=3))
    return out.getvalue()


def test_table_wraps_its_notes_column_to_the_width() -> None:
    table = Table(
        title="t",
        columns=[Column("method"), Column("lost", ">"), Column("notes", wrap=True)],
        intro=["set up"],
        notes=["note " * 30, "  code stays as it is"],
    )
    table.add("no lock", Cell("12", "bad"), "word " * 40)
    text = _printed(table, Style(colour=False, width=80))
    lines = text.splitlines()
    assert lines[:2] == ["3. t", "set up"]
    assert max(len(line) for line in lines) <= 80
    assert sum("word" in line for line in lines) > 2
    assert sum("note" in line for line in lines) > 1
    assert "  code stays as it is" in lines
    assert "\x1b[" not in text
    assert "\x1b[31m" in _printed(table, Style(colour=True, width=80))


def test_style_into_a_pipe_is_plain_and_pipe_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")  # not even this colours a pipe
    assert Style.for_stream(io.StringIO()) == Style(colour=False, width=PIPE_WIDTH)
    monkeypatch.setenv("COLUMNS", "90")
    assert Style.for_stream(io.StringIO()).width == 90


def test_version() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "seawall", "--version"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=30,
    )
    assert completed.returncode == 0
    assert completed.stdout.strip() == f"seawall {seawall.__version__}"


def test_server_command_serves_until_sigterm() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "seawall", "server"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("redis://127.0.0.1:"), process.stderr.read() if process.stderr else ""
        client = redis.Redis.from_url(url, socket_timeout=5)
        assert client.ping()
        process.terminate()
        assert process.wait(timeout=15) == 0
        with pytest.raises(redis.ConnectionError):
            redis.Redis.from_url(url, socket_timeout=5).ping()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


_STAMPEDE_ROW = re.compile(
    rf"^{_BAR}(?P<cache>GET / query / SET|seawall\.Cache){_BAR}(?P<requests>\d+){_BAR}"
    rf"(?P<queries>\d+){_BAR}(?P<p50>\d+) ms{_BAR}(?P<p99>\d+) ms{_BAR}(?P<max>\d+) ms{_BAR}"
)


def test_stampede_naive_cache_aside_queries_many_times_seawall_once(demo: DemoRun) -> None:
    rows = {}
    for line in demo.stdout.splitlines():
        match = _STAMPEDE_ROW.match(line)
        if match:
            rows[match["cache"]] = (int(match["requests"]), int(match["queries"]))
    assert set(rows) == {"GET / query / SET", "seawall.Cache"}, demo.stdout
    assert rows["seawall.Cache"] == (200, 1)
    assert rows["GET / query / SET"][0] == 200
    assert rows["GET / query / SET"][1] > 1  # the stampede the demo is about
