"""Web apps that use seawall.sessions, and the real servers that run them in tests.

The Starlette app runs under uvicorn, the Flask app under werkzeug's WSGI server, each
on a free 127.0.0.1 port; `python -m sessionapps PORT REDIS_URL` runs the Starlette app
as a process of its own (the browser test starts two).
"""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

from seawall.sessions import SessionError, SessionMiddleware, logout_everywhere


class CountingRedis(redis.asyncio.Redis):
    """Records every command it sends: each is one round trip (seawall pipelines none)."""

    sent: list[str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sent = []  # before super(): a cluster client sends commands while it starts
        super().__init__(*args, **kwargs)

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(str(args[0]))
        return await super().execute_command(*args, **options)


class CountingCluster(redis.asyncio.cluster.RedisCluster):
    sent: list[str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sent = []  # before super(): a cluster client sends commands while it starts
        super().__init__(*args, **kwargs)

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        self.sent.append(str(args[0]))
        return await super().execute_command(*args, **kwargs)


class SyncCountingRedis(redis.Redis):
    sent: list[str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sent = []  # before super(): a cluster client sends commands while it starts
        super().__init__(*args, **kwargs)

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(str(args[0]))
        return super().execute_command(*args, **options)


class SyncCountingCluster(redis.cluster.RedisCluster):
    sent: list[str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sent = []  # before super(): a cluster client sends commands while it starts
        super().__init__(*args, **kwargs)

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        self.sent.append(str(args[0]))
        return super().execute_command(*args, **kwargs)


def async_client(url: str, cluster: bool) -> Any:
    return (CountingCluster if cluster else CountingRedis).from_url(url)


def sync_client(url: str, cluster: bool) -> Any:
    return (SyncCountingCluster if cluster else SyncCountingRedis).from_url(url)


def starlette_app(client: Any, **options: Any) -> Any:
    from starlette.applications import Starlette
    from starlette.background import BackgroundTask
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    state: dict[str, Any] = {"barrier": None, "late": None, "hold": None}

    async def show(request: Request) -> JSONResponse:
        return JSONResponse({"data": dict(request.session), "user": request.session.user_id})

    async def put(request: Request) -> JSONResponse:
        """?name=value pairs; `wait=2`: load, then wait until 2 requests have loaded."""
        params = dict(request.query_params)
        wait = int(params.pop("wait", "0"))
        session = request.session
        if wait:
            if state["barrier"] is None:
                state["barrier"] = asyncio.Barrier(wait)
            await asyncio.wait_for(state["barrier"].wait(), 10)
        try:
            for name, value in params.items():
                session[name] = value
        except SessionError as exc:
            return JSONResponse({"error": type(exc).__name__, "message": str(exc)}, 400)
        return JSONResponse({"data": dict(session)})

    async def put_object(request: Request) -> JSONResponse:
        try:
            request.session["when"] = object()
        except SessionError as exc:
            return JSONResponse({"error": type(exc).__name__, "message": str(exc)}, 400)
        return JSONResponse({})

    async def grow_in_place(request: Request) -> JSONResponse:
        """Grows a list in place: only the save sees the size."""
        request.session["items"] = []
        request.session["items"].extend(["x" * 100] * int(request.query_params["n"]))
        return JSONResponse({})

    async def drop(request: Request) -> JSONResponse:
        del request.session[request.query_params["name"]]
        return JSONResponse({})

    async def login(request: Request) -> JSONResponse:
        request.session.regenerate()
        request.session["user"] = request.query_params["user"]
        request.session.bind_user(request.query_params["user"])
        return JSONResponse({})

    async def logout(request: Request) -> JSONResponse:
        request.session.clear()
        return JSONResponse({})

    async def forget(request: Request) -> JSONResponse:
        """Unbinds the user but keeps a session (same id)."""
        request.session.clear()
        request.session["anonymous"] = "1"
        return JSONResponse({})

    async def everywhere(request: Request) -> JSONResponse:
        ended = await logout_everywhere(client, request.query_params["user"])
        return JSONResponse({"ended": ended})

    async def write_late(request: Request) -> JSONResponse:
        session = request.session
        session["before"] = "1"

        def late() -> None:
            try:
                session["after"] = "1"
            except SessionError as exc:
                state["late"] = type(exc).__name__

        return JSONResponse({}, background=BackgroundTask(late))

    async def late_error(request: Request) -> JSONResponse:
        return JSONResponse({"late": state["late"]})

    async def hold(request: Request) -> JSONResponse:
        """Reads the session, then waits for /release: a read in flight."""
        state["hold"] = state["hold"] or asyncio.Event()
        data = dict(request.session)
        await asyncio.wait_for(state["hold"].wait(), 10)
        state["hold"] = None
        return JSONResponse({"data": data})

    async def release(request: Request) -> JSONResponse:
        state["hold"] = state["hold"] or asyncio.Event()
        state["hold"].set()
        return JSONResponse({})

    async def as_json(request: Request) -> JSONResponse:
        return JSONResponse(request.session)

    routes = [
        Route("/", show),
        Route("/put", put),
        Route("/put-object", put_object),
        Route("/grow", grow_in_place),
        Route("/drop", drop),
        Route("/login", login),
        Route("/logout", logout),
        Route("/forget", forget),
        Route("/everywhere", everywhere),
        Route("/write-late", write_late),
        Route("/late-error", late_error),
        Route("/hold", hold),
        Route("/release", release),
        Route("/json", as_json),
    ]
    app = Starlette(routes=routes)
    app.state.requests = state  # tests wait on what the routes do
    app.add_middleware(SessionMiddleware, redis=client, **options)
    return app


def flask_app(client: Any, config: dict[str, Any] | None = None, **options: Any) -> Any:
    from flask import Flask, flash, get_flashed_messages, jsonify, request, session
    from markupsafe import Markup

    from seawall.sessions.flask import RedisSessionInterface

    app = Flask("sessions-test")
    app.config.update(config or {})
    app.session_interface = RedisSessionInterface(client, **options)
    barriers: dict[int, threading.Barrier] = {}

    @app.get("/")
    def show() -> Any:
        return jsonify(data=dict(session), user=session.user_id)  # type: ignore[attr-defined]

    @app.get("/put")
    def put() -> Any:
        params = dict(request.args)
        wait = int(params.pop("wait", "0"))
        if wait:
            barriers.setdefault(wait, threading.Barrier(wait)).wait(10)
        try:
            for name, value in params.items():
                session[name] = value
        except SessionError as exc:
            return jsonify(error=type(exc).__name__, message=str(exc)), 400
        return jsonify(data=dict(session))

    @app.get("/grow")
    def grow() -> Any:
        session["items"] = []
        session["items"].extend(["x" * 100] * int(request.args["n"]))
        return jsonify()

    @app.get("/login")
    def login() -> Any:
        session.regenerate()  # type: ignore[attr-defined]
        session["user"] = request.args["user"]
        session.bind_user(request.args["user"])  # type: ignore[attr-defined]
        return jsonify()

    @app.get("/logout")
    def logout() -> Any:
        session.clear()
        return jsonify()

    @app.get("/everywhere")
    def everywhere() -> Any:
        return jsonify(ended=logout_everywhere(client, request.args["user"]))

    @app.get("/nothing")
    def nothing() -> Any:
        return ""

    @app.get("/read")
    def read() -> Any:
        return jsonify(colour=session.get("colour"))

    @app.get("/flash")
    def flash_some() -> Any:
        flash("saved")
        flash(Markup("<b>careful</b>"), "warning")
        return ""

    @app.get("/flashed")
    def flashed() -> Any:
        messages = get_flashed_messages(with_categories=True)
        # Each as it came back: its type, its category, its message's type and text.
        return jsonify([[type(m).__name__, m[0], type(m[1]).__name__, str(m[1])] for m in messages])

    return app


@contextmanager
def werkzeug_thread(app: Any) -> Iterator[str]:
    """`app` under werkzeug's threaded WSGI server in a thread; yields its base URL."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(10)
        server.server_close()


def free_socket() -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def uvicorn_thread(app: Any) -> Iterator[str]:
    """`app` under uvicorn in a thread of this process; yields its base URL."""
    import uvicorn

    sock = free_socket()
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start in 10 s"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def main(argv: list[str]) -> None:
    """`python sessionapps.py PORT REDIS_URL`: the Starlette app under uvicorn."""
    import uvicorn

    port, url = int(argv[0]), argv[1]
    app = starlette_app(redis.asyncio.Redis.from_url(url))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")


if __name__ == "__main__":
    main(sys.argv[1:])
