"""Faults of the order pipeline: sinks SIGKILLed at the worst points, Redis restarted
mid-sale. Afterwards every order sold is exactly one row and the books balance."""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from typing import Any

import redis
from conftest import SPAWN
from sinkdb import Database
from sinkworkers import buy, sink_until

import seawall

UNITS = 100


def _wait_stopped(pid: int, timeout: float = 30.0) -> None:
    """Until the process is stopped (state T in /proc): it froze itself at its checkpoint."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                return
        time.sleep(0.01)
    raise AssertionError(f"sink process {pid} never reached its checkpoint")


def _kill_at(url: str, name: str, db: Database, stage: str, batch: int) -> None:
    child = SPAWN.Process(target=sink_until, args=(url, name, db.url, db.table, stage, batch))
    child.start()
    assert child.pid is not None
    try:
        _wait_stopped(child.pid)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join(10)
    assert child.exitcode == -signal.SIGKILL


# --- acceptance 3: SIGKILL between insert and ack, and between read and insert ------------


def test_sinks_killed_mid_batch_lose_and_duplicate_nothing(
    seawall_redis: redis.Redis, seawall_url: str, database: Database
) -> None:
    stock = seawall.Stock(seawall_redis, "sku:k")
    stock.put(UNITS)
    for n in range(UNITS):
        assert stock.take(f"o{n}")
    stock.cancel("o95")  # a cancel after the takes, saved by the survivor
    log = stock.keys.log

    # A: reads 30 entries, COMMITs them, and dies before its XACK.
    _kill_at(seawall_url, "sku:k", database, "saved", 30)
    assert database.count() == 30
    # B: reads the next 30 and dies before writing anything.
    _kill_at(seawall_url, "sku:k", database, "read", 30)
    assert database.count() == 30
    pending = seawall_redis.xpending(log, "seawall-sink")
    assert pending["pending"] == 60 and len(pending["consumers"]) == 2

    # A live sink claims both dead consumers' entries once idle and finishes them.
    survivor = seawall.OrderSink(
        seawall_redis, "sku:k", database.url, table=database.table, claim_idle=0.3, batch=50
    )
    saved = survivor.drain(timeout=30)
    assert saved == UNITS + 1  # 60 claimed + 40 unread takes + 1 cancel
    rows = database.rows()
    assert len(rows) == UNITS
    assert sorted(order for _, order, _, _ in rows) == sorted(f"o{n}" for n in range(UNITS))
    assert [order for _, order, _, cancelled in rows if cancelled] == ["o95"]
    assert seawall_redis.xpending(log, "seawall-sink")["pending"] == 0
    assert seawall_redis.xlen(log) == 0
    report = survivor.reconcile()
    assert report.balanced and report.before.difference == 0, str(report)
    survivor.close()


# --- acceptance 4: Redis restarted (appendonly, appendfsync always) mid-sale -------------


def test_redis_restart_mid_sale_leaves_balanced_books(
    seawall_server_factory: Any, database: Database, process_pool: Any
) -> None:
    server = seawall_server_factory(appendonly=True)
    r = server.client(socket_timeout=5)
    stock = seawall.Stock(r, "sku:restart")
    stock.put(UNITS)
    start_key = f"{{start}}:{uuid.uuid4().hex}"
    ids = [f"b{n}" for n in range(240)]
    chunks = [ids[p::4] for p in range(4)]

    stop = threading.Event()
    sink = seawall.OrderSink(
        server.client(socket_timeout=5),
        stock,
        database.url,
        table=database.table,
        batch=8,
        claim_idle=0.5,
    )
    runner = threading.Thread(target=sink.run, args=(stop,), kwargs={"block": 0.1})
    runner.start()
    try:
        pending = process_pool.starmap_async(
            buy, [(server.url, "sku:restart", chunk, start_key, 0.02) for chunk in chunks]
        )
        r.rpush(start_key, *range(4))
        # Crash Redis (SIGKILL) once some units are sold, and start it again from its AOF.
        deadline = time.monotonic() + 30
        # Every buyer past its start token (a late one would meet the restart in BLPOP,
        # outside its retries) and some units sold.
        while r.llen(start_key) > 0 or int(r.get(stock.keys.taken) or 0) < 30:
            assert time.monotonic() < deadline, "the sale did not start"
            time.sleep(0.005)
        server.kill()
        server.restart()
        sold_at_restart = int(r.get(stock.keys.taken) or 0)
        sold = [order for chunk in pending.get(60) for order in chunk]
    finally:
        stop.set()
        runner.join(20)
    assert not runner.is_alive()
    assert 30 <= sold_at_restart < UNITS, "the restart came after the sale; nothing was tested"
    sink.drain(timeout=30)

    report = sink.reconcile()
    assert report.balanced, str(report)
    assert report.after.difference == 0 and report.after.redis_difference == 0
    assert report.after.on_sale == UNITS and report.after.available == 0
    assert len(sold) == UNITS
    assert sorted(order for _, order, _, _ in database.rows()) == sorted(sold)
    sink.close()
