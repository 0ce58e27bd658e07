"""Where a hand-over's time goes: bench/lock_handover.py's hand-over, cut into its steps.

The same holder and waiter processes as bench/lock_handover.py; each process notes the
moment its redis-py connections send a command or return a reply (the only patch is on
redis-py's Connection class, so every library is timed at the same points):

    release call   the holder calls release() ... the holder's release command is sent
    to message     ... the waiting process reads the wake-up (a pub/sub message)
    message->try   ... the waiting process sends its try (seawall: the listener thread)
    try            ... the try's reply is read
    reply->holds   ... acquire() returns in the waiting thread

Medians over the hand-overs, per library; CLOCK_MONOTONIC is one clock for the machine.

    PYTHONPATH=src .venv/bin/python bench/lock_handover_steps.py [--quick] [--count N]
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

import redis
import redis.connection
from _harness import (
    Column,
    Goal,
    Table,
    format_table,
    machine_note,
    median,
    parse_args,
    unique_name,
    write_json,
)
from _locks import FLOOR_LOCKS, key_name, make_lock

import seawall

STEPS = ["release call", "to message", "message->try", "try", "reply->holds", "total"]
COLUMNS = [Column(step.replace(" ", "_"), f"{step} us", ".0f") for step in STEPS]
HEADLINE = "total"
FIRST = "library"
GOALS: list[Goal] = []  # an explanation of bench/lock_handover.py's figures, not a goal
LIBRARIES = ["seawall.Lock", *FLOOR_LOCKS]
DELAY_MIN, DELAY_SPAN = 0.002, 0.100  # as bench/lock_handover.py
WARMUP = 5

# (monotonic ns, "send" | "reply" | "message") per command, in this process.
_events: list[tuple[int, str]] = []
_events_mutex = threading.Lock()


def _note_connections() -> None:
    """Note every command sent and every reply or pub/sub message read, in this process."""
    connection_class: Any = redis.connection.AbstractConnection
    send, read = connection_class.send_packed_command, connection_class.read_response

    def noted_send(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _events_mutex:
            _events.append((time.monotonic_ns(), "send"))
        return send(self, *args, **kwargs)

    def noted_read(self: Any, *args: Any, **kwargs: Any) -> Any:
        response = read(self, *args, **kwargs)
        message = isinstance(response, list) and response[:1] == [b"message"]
        with _events_mutex:
            _events.append((time.monotonic_ns(), "message" if message else "reply"))
        return response

    connection_class.send_packed_command = noted_send
    connection_class.read_response = noted_read


def _taken() -> list[tuple[int, str]]:
    with _events_mutex:
        taken = list(_events)
        _events.clear()
    return taken


def waiter_main(url: str, library: str, name: str, conn: Connection) -> None:
    _note_connections()
    client = redis.Redis.from_url(url)
    lock = make_lock(library, client, name)
    client.ping()
    conn.send("ready")
    while conn.recv() == "go":
        conn.send("trying")
        _taken()
        lock.acquire()
        acquired = time.monotonic_ns()
        events = _taken()
        lock.release()
        conn.send((acquired, events))
    client.close()


def _steps(released: int, sent: int, acquired: int, events: list[tuple[int, str]]) -> Any:
    """The five steps of one hand-over (ns), from the waiter's events after the release."""
    after = [(at, kind) for at, kind in events if at >= sent]
    message = next((at for at, kind in after if kind == "message"), None)
    if message is None:
        return None  # woken by its own wait running out, not by the release
    try_sent = next((at for at, kind in after if kind == "send" and at >= message), None)
    if try_sent is None:
        return None
    reply = next((at for at, kind in after if kind == "reply" and at >= try_sent), None)
    if reply is None:
        return None
    return [sent - released, message - sent, try_sent - message, reply - try_sent]


def measure(url: str, library: str, count: int, rng: random.Random) -> list[list[float]]:
    ctx = multiprocessing.get_context("spawn")
    name = key_name(unique_name("steps"), library)
    parent, child = ctx.Pipe()
    process = ctx.Process(target=waiter_main, args=(url, library, name, child))
    process.start()
    child.close()
    client = redis.Redis.from_url(url)
    holder = make_lock(library, client, name)
    rows: list[list[float]] = []
    try:
        if parent.recv() != "ready":
            raise RuntimeError(f"waiter for {library} did not start")
        for number in range(WARMUP + count):
            holder.acquire()
            parent.send("go")
            if parent.recv() != "trying":
                raise RuntimeError(f"waiter for {library} is out of step")
            time.sleep(DELAY_MIN + rng.random() * DELAY_SPAN)
            _taken()
            released = time.monotonic_ns()
            holder.release()
            sent = next(at for at, kind in _taken() if kind == "send")
            acquired, events = parent.recv()
            steps = _steps(released, sent, acquired, events)
            if number >= WARMUP and steps is not None:
                reply = steps[3] + sum(steps[:3]) + released
                rows.append([*steps, acquired - reply, acquired - released])
    finally:
        parent.send("stop")
        process.join(10)
        client.close()
    return rows


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    count = 60 if args.quick else args.count
    rng = random.Random(args.seed)
    _note_connections()
    table: Table = {}
    with seawall.server() as url:
        print(f"lock_handover_steps: {machine_note()}; {count} hand-overs per library")
        for library in LIBRARIES:
            rows = measure(url, library, count, rng)
            table[library] = {
                column.key: median([row[i] for row in rows]) / 1e3
                for i, column in enumerate(COLUMNS)
            }
            print(f"  {library}: {len(rows)} hand-overs woken by the release")
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    write_json(args.json, "lock_handover_steps", table, {"count": count, "seed": args.seed})


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--count", type=int, default=200, help="hand-overs per library")
    parser.add_argument("--seed", type=int, default=1, help="seed of the holding times")


if __name__ == "__main__":
    main()
