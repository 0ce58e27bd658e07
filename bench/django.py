"""seawall.django against django-redis and Django's own RedisCache, side by side in one run.

(a) The page stampede: 4 processes x 50 threads request one cache_page view whose
rendering takes 50 ms, right after its page expired (each measured round deletes the
page from Redis, as its expiry would, leaving its Vary headers; a first, unmeasured
round renders it once and opens the connections). All requesters of a round start at
once. Per backend: renderings per expiry (the rendering stands for the view's queries)
and the requesters' latency. seawall.django runs under seawall.django's cache_page, the
others under Django's. The "bare wait" row uses no cache at all: in each process, the
first requester renders and the others wait for it on an event, the least any cache can
do here; seawall.django's p99 is compared with it. The "page not expired" row asks for the
page while it is there: what serving a cached page to these threads costs.
(b) A hit: cache.get() of a small dict through each backend in one thread (pickle, as
Django stores it, for all), against Django's RedisCache in the same passes; (c) a hit
from seawall.django's in-process L1 (OPTIONS l1_size) against that same built-in hit.

    PYTHONPATH=src .venv/bin/python bench/django.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

# This file is named after Django: with bench/ first on sys.path, `import django` would
# find this file. bench/ goes last, so _harness is still found and Django is Django.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]

import redis  # noqa: E402
from _harness import (  # noqa: E402
    Column,
    Goal,
    Table,
    format_goals,
    format_table,
    interleaved_rounds,
    machine_note,
    median,
    parse_args,
    percentile,
    server_note,
    unique_name,
    write_json,
)

import seawall  # noqa: E402

RENDER_SECONDS = 0.05
ROUND_GAP = 0.2  # after the barrier, before a round starts

BARE = "bare wait (no cache, one rendering per process)"
SEAWALL = "seawall.django"
DJANGO_REDIS = "django-redis"
BUILTIN = "Django's RedisCache"
BACKENDS = {
    SEAWALL: "seawall.django.RedisCache",
    DJANGO_REDIS: "django_redis.cache.RedisCache",
    BUILTIN: "django.core.cache.backends.redis.RedisCache",
}
# The same requests on a page that has not expired: what serving it from Redis costs
# these 200 threads, rendering aside.
HITS_ONLY = "seawall.django, page not expired"
STAMPEDE = [BARE, HITS_ONLY, SEAWALL, DJANGO_REDIS, BUILTIN]

HIT_BUILTIN = "hit: Django's RedisCache"
HIT_SEAWALL = "hit: seawall.django"
HIT_L1 = "hit: seawall.django L1"
HIT_DJANGO_REDIS = "hit: django-redis"
HITS = {
    HIT_BUILTIN: (BACKENDS[BUILTIN], {}),
    HIT_SEAWALL: (BACKENDS[SEAWALL], {}),
    HIT_L1: (BACKENDS[SEAWALL], {"l1_size": 1000, "l1_ttl": 60.0}),
    HIT_DJANGO_REDIS: (BACKENDS[DJANGO_REDIS], {}),
}
HIT_VALUE = {"id": 42, "name": "Ada Lovelace", "email": "ada@example.com", "roles": [1, 2]}

COLUMNS = [
    Column("renders", "renders/expiry", ".2f"),
    Column("p50", "p50 ms", ".1f"),
    Column("p99", "p99 ms", ".1f"),
    Column("p99_vs_bare", "p99 vs bare wait", ".2f"),
    Column("hit_us", "hit us", ".1f"),
    Column("hit_cpu_us", "hit CPU us", ".1f"),
    Column("hit_time_ratio", "hit time vs built-in", ".2f"),
    Column("hit_speedup", "hits/s vs built-in", ".1f"),
]
HEADLINE = "p99_vs_bare"
FIRST = "contender"

GOALS = [
    Goal("seawall.django cache_page: 1 rendering per expiry", SEAWALL, "renders", "==", 1.0),
    Goal("seawall.django cache_page p99 <= 1.1x the bare wait", SEAWALL, "p99_vs_bare", "<=", 1.1),
    Goal(
        "seawall.django hit <= 1.1x the time of Django's RedisCache hit",
        HIT_SEAWALL,
        "hit_time_ratio",
        "<=",
        1.1,
    ),
    Goal("seawall.django L1 hit >= 5x faster than Django's", HIT_L1, "hit_speedup", ">=", 5.0),
]


def configure(url: str, run_id: str, caches: dict[str, tuple[str, dict[str, Any]]]) -> None:
    """Django's settings in this process: `caches` is alias -> (BACKEND, OPTIONS)."""
    import django
    from django.conf import settings

    settings.configure(
        SECRET_KEY="seawall-bench",
        ALLOWED_HOSTS=["*"],
        USE_TZ=True,
        CACHES={
            alias: {
                "BACKEND": backend,
                "LOCATION": url,
                "KEY_PREFIX": run_id,
                "TIMEOUT": 300,
                "OPTIONS": options,
            }
            for alias, (backend, options) in caches.items()
        },
    )
    django.setup()


# --- (a) the page stampede ------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    url: str
    contender: str
    run_id: str
    rounds: int
    requesters: int


def _page_view(contender: str, renders: list[int]) -> Any:
    from django.http import HttpResponse

    def render(request: Any) -> Any:
        renders.append(1)
        time.sleep(RENDER_SECONDS)
        return HttpResponse("<html>" + "rendered " * 200 + "</html>")

    if contender == BARE:
        return _one_rendering_per_process(render)
    if contender in (SEAWALL, HITS_ONLY):
        from seawall.django import cache_page
    else:
        from django.views.decorators.cache import cache_page
    return cache_page(300)(render)


def _one_rendering_per_process(render: Any) -> Any:
    """The bare wait: per process and round, the first requester renders and the others
    wait for its response on an event (nothing is stored anywhere)."""
    flights: dict[str, tuple[threading.Event, list[Any]]] = {}
    mutex = threading.Lock()

    def view(request: Any) -> Any:
        with mutex:
            flight = flights.get(request.round)
            leader = flight is None
            if flight is None:
                flight = flights[request.round] = (threading.Event(), [])
        event, response = flight
        if leader:
            response.append(render(request))
            event.set()
        else:
            event.wait(10)
        return response[0]

    return view


def worker_main(plan: Plan, barrier: Any, conn: Connection, index: int) -> None:
    """Child process: a warm-up round, then `rounds` stampedes of `requesters` threads on
    the page; sends the latencies of the measured rounds and the renderings counted."""
    backend = BACKENDS[SEAWALL] if plan.contender == HITS_ONLY else BACKENDS.get(plan.contender)
    backend = backend or BACKENDS[BUILTIN]
    configure(plan.url, plan.run_id, {"default": (backend, {})})
    from django.core.cache import cache
    from django.test import RequestFactory

    renders: list[int] = []
    view = _page_view(plan.contender, renders)
    admin = redis.Redis.from_url(plan.url)
    cache.get("warm-up")  # connected before the first round, as a serving worker is
    factory = RequestFactory()
    latencies: list[float] = []
    for round_no in range(plan.rounds + 1):
        barrier.wait(60)
        if round_no == 1:
            renders.clear()
        if round_no and index == 0 and plan.contender != HITS_ONLY:
            # The page expires; its Vary headers (the cache_header key) stay, as they
            # outlive it when both have the same timeout and the headers were learnt first.
            pages = list(admin.scan_iter(match=f"{plan.run_id}:*cache_page*", count=1000))
            if pages:
                admin.delete(*pages)
        barrier.wait(60)
        start = time.monotonic() + ROUND_GAP
        measured: list[float] = []

        def requester(
            round_no: int = round_no, start: float = start, out: list[float] = measured
        ) -> None:
            request = factory.get("/prices/")
            request.round = round_no
            time.sleep(max(0.0, start - time.monotonic()))
            response = view(request)
            out.append(time.monotonic() - start)
            assert response.status_code == 200

        threads = [threading.Thread(target=requester) for _ in range(plan.requesters)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if round_no:
            latencies += measured
    admin.close()
    conn.send((latencies, len(renders)))


def stampede(url: str, contender: str, processes: int, requesters: int, rounds: int) -> Any:
    ctx = multiprocessing.get_context("spawn")
    run_id = unique_name("django")
    plan = Plan(url, contender, run_id, rounds, requesters)
    barrier = ctx.Barrier(processes)
    pipes, workers = [], []
    admin = redis.Redis.from_url(url)
    try:
        for index in range(processes):
            parent, child = ctx.Pipe()
            worker = ctx.Process(target=worker_main, args=(plan, barrier, child, index))
            worker.start()
            child.close()
            pipes.append(parent)
            workers.append(worker)
        found = [pipe.recv() for pipe in pipes]
        for worker in workers:
            worker.join(10)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
        for key in admin.scan_iter(match=f"{run_id}:*", count=1000):
            admin.delete(key)
        admin.close()
    latencies = [x * 1000 for per_process, _ in found for x in per_process]
    return {
        "renders": sum(count for _, count in found) / rounds,
        "p50": percentile(latencies, 50),
        "p99": percentile(latencies, 99),
    }


# --- (b), (c) hits ------------------------------------------------------------------


def hits(url: str, gets: int, passes: int) -> Table:
    """Each hit contender's get() of one key, `gets` times per pass, interleaved."""
    import time as clock

    from django.core.cache import caches

    for alias in HITS:
        cache = caches[alias]
        cache.set("hit", HIT_VALUE)
        for _ in range(100):  # connected, and the L1 filled
            assert cache.get("hit") == HIT_VALUE

    def run_round(alias: str) -> tuple[float, float]:
        get = caches[alias].get
        cpu, started = clock.process_time(), clock.perf_counter()
        for _ in range(gets):
            get("hit")
        took = clock.perf_counter() - started
        return gets / took, (clock.process_time() - cpu) * 1e6 / gets

    names = list(HITS)
    rounds, cpu = interleaved_rounds(names, run_round, passes)
    table: Table = {}
    for name in names:
        paired = list(zip(rounds[name], rounds[HIT_BUILTIN], strict=True))
        table[name] = {
            "hit_us": 1e6 / median(rounds[name]),
            "hit_cpu_us": median(cpu[name]),
            # Per pass, side by side: the built-in's hits/s over this one's, and back.
            "hit_time_ratio": median([theirs / mine for mine, theirs in paired]),
            "hit_speedup": median([mine / theirs for mine, theirs in paired]),
        }
    return table


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--requesters", type=int, default=50, help="threads per process")
    parser.add_argument("--rounds", type=int, default=5, help="expiries per contender")
    parser.add_argument("--gets", type=int, default=20_000, help="hits per pass")
    parser.add_argument("--passes", type=int, default=7, help="passes of the hit rounds")


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], _arguments)
    rounds = 2 if args.quick else args.rounds
    gets = 2_000 if args.quick else args.gets
    passes = 3 if args.quick else args.passes
    table: Table = {}
    with seawall.server() as url:
        admin = redis.Redis.from_url(url)
        print(f"django: {machine_note()}; {server_note(admin)}")
        admin.close()
        print(
            f"(a) {args.processes} processes x {args.requesters} threads, {rounds} expiries "
            f"per contender, rendering {RENDER_SECONDS * 1000:.0f} ms"
        )
        for contender in STAMPEDE:
            row = stampede(url, contender, args.processes, args.requesters, rounds)
            table[contender] = row
            print(
                f"  {contender}: {row['renders']:.2f} renders/expiry, "
                f"p50 {row['p50']:.1f} ms, p99 {row['p99']:.1f} ms"
            )
        for contender in STAMPEDE:
            table[contender]["p99_vs_bare"] = table[contender]["p99"] / table[BARE]["p99"]
        print(f"(b), (c) {passes} passes of {gets:,} hits each")
        configure(url, unique_name("django-hits"), HITS)
        table.update(hits(url, gets, passes))
    print()
    print(format_table(COLUMNS, table, first=FIRST))
    print("\nGoals:\n" + format_goals(GOALS, table))
    write_json(args.json, "django", table, {"rounds": rounds, "gets": gets, "passes": passes})


if __name__ == "__main__":
    main()
