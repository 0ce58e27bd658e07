"""Per-request cost of a session: seawall.sessions vs Starlette's cookie sessions vs
starsessions' Redis store, in one Starlette app called in-process (httpx's ASGI
transport: no HTTP server or socket noise in the figure, only the middleware and Redis).

    PYTHONPATH=src .venv/bin/python bench/sessions.py [--requests 2000] [--quick]

Each contender serves a session of 5 fields: "read" requests read it, "write" requests
change one field. Reported: microseconds per request (median of rounds), the overhead
over the same app without sessions, Redis round trips per request (counted on the
client), and how many of 50 pairs of parallel requests of one user, each setting a
different field, lost one of the two writes.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import redis.asyncio

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _harness

import seawall
from seawall.sessions import SessionMiddleware

FIELDS = {f"field{i}": f"value {i} " * 4 for i in range(5)}


def make_app(kind: str, client: Any) -> Any:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    barrier: dict[str, asyncio.Barrier] = {}

    async def session_of(request: Request) -> Any:
        if kind == "starsessions (Redis)":
            from starsessions import load_session

            await load_session(request)
        return request.session if kind != "no sessions" else dict(FIELDS)

    async def setup(request: Request) -> JSONResponse:
        session = await session_of(request)
        session.update(FIELDS)
        return JSONResponse({})

    async def read(request: Request) -> JSONResponse:
        session = await session_of(request)
        return JSONResponse({"n": len(session["field0"])})

    async def write(request: Request) -> JSONResponse:
        session = await session_of(request)
        field = request.query_params.get("field", "field1")
        if "pair" in request.query_params:
            pair = request.query_params["pair"]
            await barrier.setdefault(pair, asyncio.Barrier(2)).wait()
        # A new value each time: an unchanged value is no write for seawall.
        session[field] = request.query_params.get("value") or str(time.perf_counter_ns())
        return JSONResponse({})

    middleware: list[Middleware] = []
    if kind == "seawall.sessions":
        middleware = [Middleware(SessionMiddleware, redis=client)]
    elif kind == "Starlette cookie":
        from starlette.middleware.sessions import SessionMiddleware as CookieSessions

        middleware = [Middleware(CookieSessions, secret_key="bench-secret-key-0123456789abcdef")]
    elif kind == "starsessions (Redis)":
        from starsessions import SessionMiddleware as StarSessions
        from starsessions.stores.redis import RedisStore

        store = RedisStore(connection=client, prefix="starsessions:")
        middleware = [
            Middleware(
                StarSessions,
                store=store,
                lifetime=14 * 86400,
                rolling=True,
                cookie_https_only=False,
            )
        ]

    async def show(request: Request) -> JSONResponse:
        session = await session_of(request)
        names = request.query_params["fields"].split(",")
        return JSONResponse({"n": sum(1 for name in names if name in session)})

    routes = [
        Route("/setup", setup),
        Route("/read", read),
        Route("/write", write),
        Route("/show", show),
    ]
    return Starlette(routes=routes, middleware=middleware)


async def timed(http: httpx.AsyncClient, path: str, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await http.get(path)
    return (time.perf_counter() - start) / n * 1e6


async def run_all(url: str, n: int, rounds: int, pairs: int) -> _harness.Table:
    """Every contender in one event loop, rounds interleaved (forward, then reverse
    order), so a busy moment of the machine hits them all alike."""
    clients = {kind: redis.asyncio.Redis.from_url(url) for kind in KINDS}
    https = {
        kind: httpx.AsyncClient(
            transport=httpx.ASGITransport(app=make_app(kind, clients[kind])),
            base_url="http://bench",
        )
        for kind in KINDS
    }
    times: dict[str, dict[str, list[float]]] = {k: {"read": [], "write": []} for k in KINDS}
    table: _harness.Table = {}
    for http in https.values():
        await http.get("/setup")
        for path in ("/read", "/write"):  # warm up (scripts loaded, connections open)
            for _ in range(20):
                await http.get(path)
    for i in range(rounds):
        order = KINDS if i % 2 == 0 else KINDS[::-1]
        for kind in order:
            for what in ("read", "write"):
                times[kind][what].append(await timed(https[kind], f"/{what}", n))
    for kind, http in https.items():
        figures = {f"{what}_us": statistics.median(times[kind][what]) for what in ("read", "write")}
        for what in ("read", "write"):
            with _harness.counting_requests() as counter:
                for _ in range(100):
                    await http.get(f"/{what}")
            figures[f"{what}_trips"] = counter.requests / 100
        figures["lost"] = await count_lost(http, kind, pairs)
        table[kind] = figures
        await http.aclose()
        await clients[kind].aclose()
    return table


async def count_lost(http: httpx.AsyncClient, kind: str, pairs: int) -> float:
    if kind == "no sessions":
        return float("nan")
    lost = 0
    for i in range(pairs):
        await asyncio.gather(
            http.get(f"/write?field=a{i}&value=1&pair={i}"),
            http.get(f"/write?field=b{i}&value=1&pair={i}"),
        )
        seen = await http.get(f"/show?fields=a{i},b{i}")
        lost += 2 - int(seen.json()["n"])
    return float(lost)


KINDS = ["no sessions", "Starlette cookie", "starsessions (Redis)", "seawall.sessions"]

HEADLINE = "read_us"
FIRST = "contender"
COLUMNS = [
    _harness.Column("read_us", "read us/req", ",.0f"),
    _harness.Column("read_over", "read overhead us", ",.0f"),
    _harness.Column("write_us", "write us/req", ",.0f"),
    _harness.Column("write_over", "write overhead us", ",.0f"),
    _harness.Column("read_trips", "round trips/read", ".2f"),
    _harness.Column("write_trips", "round trips/write", ".2f"),
    _harness.Column("lost", "writes lost /100", ".0f"),
]

GOALS = [
    _harness.Goal(
        "seawall: <= 1 round trip per reading request", "seawall.sessions", "read_trips", "<=", 1.0
    ),
    _harness.Goal(
        "seawall: <= 2 round trips per writing request",
        "seawall.sessions",
        "write_trips",
        "<=",
        2.0,
    ),
    _harness.Goal(
        "seawall: no write of parallel requests lost", "seawall.sessions", "lost", "==", 0.0
    ),
]


def main() -> None:
    def extra(parser: Any) -> None:
        parser.add_argument("--requests", type=int, default=300, help="requests per round")
        parser.add_argument("--rounds", type=int, default=9)
        parser.add_argument("--markdown", action="store_true")

    args = _harness.parse_args(__doc__ or "", extra)
    n, rounds, pairs = (100, 3, 20) if args.quick else (args.requests, args.rounds, 50)
    with seawall.server() as url:
        table = asyncio.run(run_all(url, n, rounds, pairs))
        note = _harness.server_note(redis.Redis.from_url(url))
    base = table["no sessions"]
    for figures in table.values():
        figures["read_over"] = figures["read_us"] - base["read_us"]
        figures["write_over"] = figures["write_us"] - base["write_us"]
        figures["lost"] = figures["lost"] * 100 / (2 * pairs)
    print(_harness.format_table(COLUMNS, table, first=FIRST, markdown=args.markdown))
    print(f"\n{_harness.machine_note()}; {note}; {n} requests x {rounds} rounds, {pairs} pairs")
    print(_harness.format_goals(GOALS, table))
    _harness.write_json(args.json, "sessions", table, {"requests": n, "rounds": rounds})


if __name__ == "__main__":
    main()
