"""How fast the MariaDB binlog source delivers row changes, and how soon after a COMMIT.

    PYTHONPATH=src .venv/bin/python bench/cdc_mariadb.py [--rows 20000] [--commits 300]

Throughput: `--rows` single-row UPDATEs are committed first (in transactions of 1 and of
100 rows) while the source is open but not read, then the source is drained: the figure
is the source alone (decode + hand-over), not the server's write speed. Latency: one
UPDATE per commit, the time from the commit returning to the client until `read()`
returns its TxEnd (and, beside it, from the commit being sent).
"""

from __future__ import annotations

import argparse
import statistics
import time

import pymysql

from seawall.cdc._events import RowChange, TxEnd
from seawall.cdc.mariadb import MariaDBSource
from seawall.launcher._mariadb import MariaDBProcess


def throughput(server: MariaDBProcess, rows: int, per_tx: int) -> tuple[float, float]:
    """(row changes per second read, seconds the writes took)."""
    conn = pymysql.connect(host=server.host, port=server.port, user="root", database="bench")
    cursor = conn.cursor()
    source = MariaDBSource(server.url("bench"))
    source.open(None)
    started = time.perf_counter()
    for first in range(0, rows, per_tx):
        for n in range(first, min(first + per_tx, rows)):
            cursor.execute("UPDATE items SET v = v + 1 WHERE id = %s", (n % 1000,))
        conn.commit()
    written = time.perf_counter() - started
    seen = ends = 0
    started = time.perf_counter()
    while seen < rows:
        for event in source.read(5.0):
            seen += isinstance(event, RowChange)
            ends += isinstance(event, TxEnd)
    elapsed = time.perf_counter() - started
    assert ends >= rows // per_tx
    source.close()
    conn.close()
    return rows / elapsed, written


def latency(server: MariaDBProcess, commits: int) -> tuple[list[float], list[float]]:
    conn = pymysql.connect(
        host=server.host, port=server.port, user="root", database="bench", autocommit=True
    )
    cursor = conn.cursor()
    source = MariaDBSource(server.url("bench"))
    source.open(None)
    after_ack: list[float] = []
    after_send: list[float] = []
    for n in range(commits):
        sent = time.perf_counter()
        cursor.execute("UPDATE items SET v = v + 1 WHERE id = %s", (n % 1000,))
        acked = time.perf_counter()
        while not any(isinstance(event, TxEnd) for event in source.read(5.0)):
            pass
        done = time.perf_counter()
        after_ack.append(done - acked)
        after_send.append(done - sent)
    source.close()
    conn.close()
    return after_ack, after_send


def _pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--commits", type=int, default=300)
    args = parser.parse_args()
    with MariaDBProcess() as server:
        conn = pymysql.connect(host=server.host, port=server.port, user="root", autocommit=True)
        cursor = conn.cursor()
        cursor.execute("CREATE DATABASE bench")
        cursor.execute("CREATE TABLE bench.items (id INT PRIMARY KEY, v BIGINT, note VARCHAR(40))")
        cursor.executemany(
            "INSERT INTO bench.items VALUES (%s, 0, 'some text')", [(n,) for n in range(1000)]
        )
        conn.close()
        for per_tx in (1, 100):
            rate, written = throughput(server, args.rows, per_tx)
            print(
                f"{args.rows} UPDATEs, {per_tx} per transaction: source delivers "
                f"{rate:,.0f} row changes/s (writing them took {written:.1f} s)"
            )
        after_ack, after_send = latency(server, args.commits)
        print(
            f"COMMIT -> read() returns its TxEnd over {args.commits} commits: "
            f"p50 {_pct(after_ack, 50):.2f} ms, p99 {_pct(after_ack, 99):.2f} ms after the "
            f"commit returned; p50 {_pct(after_send, 50):.2f} ms, p99 "
            f"{_pct(after_send, 99):.2f} ms after it was sent"
        )


if __name__ == "__main__":
    main()
