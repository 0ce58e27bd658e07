"""Faults during a sale: the server crashes (SIGKILL) and restarts from its append-only file."""

from __future__ import annotations

import time
from typing import Any

from stockworkers import START_KEY, sell_through_restart, start_sellers

import seawall

PROCESSES = 8
UNITS = 100
ATTEMPTS = 2000


# --- acceptance 4: the server restarted in the middle of the sale ------------------------------


def test_server_crash_mid_sale_neither_oversells_nor_loses_a_take(
    seawall_server_factory: Any, process_pool: Any
) -> None:
    # appendonly=True runs the server with appendfsync always: a write is on disk before
    # its reply leaves, so a take that answered True survives the crash.
    server = seawall_server_factory(appendonly=True)
    r = server.client()
    stock = seawall.Stock(r, "sku:crash")
    stock.put(UNITS)
    ids = [f"o-{i}" for i in range(ATTEMPTS)]
    # Each seller waits 20 ms after each unit it gets: 8 sellers sell about 400 units a
    # second, so units are left when the server crashes (after 20), and some are taken
    # after it restarts. Unpaced, a fast machine sold all 100 between the look and the kill.
    pending = process_pool.starmap_async(
        sell_through_restart,
        [(server.url, "sku:crash", ids[p::PROCESSES], 20.0, 0.02) for p in range(PROCESSES)],
    )
    start_sellers(r, PROCESSES)
    give_up = time.monotonic() + 30
    # Crash only once every seller has started (the start tokens are not retried).
    while r.llen(START_KEY) > 0 or (taken_before_crash := stock.taken()) < 20:
        if pending.ready():
            pending.get()  # a seller failed: raise its error here
        assert time.monotonic() < give_up, (
            f"the sale never started: {r.llen(START_KEY)} start tokens left, "
            f"{stock.taken()} units taken"
        )
    server.kill()
    time.sleep(0.2)  # sellers meet a dead server for a while, as in a real crash
    server.restart()
    restarted_ns = time.monotonic_ns()
    ledger = [entry for part in pending.get(timeout=120) for entry in part]
    r.close()

    r = server.client()
    assert taken_before_crash < UNITS, "the crash came after the sale: nothing was tested"
    assert any(taken and at > restarted_ns for _, taken, _, at in ledger)
    assert any(tries > 1 for _, _, tries, _ in ledger), "no take met the crash"
    sold = {order for order, taken, _, _ in ledger if taken}
    recorded = {k.decode(): int(v) for k, v in r.hgetall(stock.keys.orders).items()}
    logged = [f[b"order"].decode() for _, f in r.xrange(stock.keys.log)]
    # Every take that answered True is in the hash and in the log, each order once...
    assert sold == set(recorded) == set(logged)
    assert len(logged) == len(set(logged))
    # ... and no more were sold than were on sale; the counters agree with the orders.
    assert len(sold) == UNITS
    on_sale, available, taken = (
        int(r.get(k)) for k in (stock.keys.onsale, stock.keys.avail, stock.keys.taken)
    )
    assert on_sale == available + taken == sum(recorded.values()) == UNITS
    r.close()
