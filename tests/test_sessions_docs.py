"""The two complete examples of docs/sessions.md, run as written: the FastAPI app under
uvicorn and the Flask app under werkzeug, sharing one user's session."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import sessionapps

DOC = Path(__file__).resolve().parent.parent / "docs" / "sessions.md"


def _examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def _run(source: str) -> Any:
    namespace: dict[str, Any] = {"__name__": "sessions_example"}
    exec(compile(source, str(DOC), "exec"), namespace)
    return namespace["app"]


def test_the_documented_fastapi_and_flask_apps_work_and_share_sessions(
    standalone: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", standalone.url)
    fastapi_source, flask_source = _examples()
    with (
        sessionapps.uvicorn_thread(_run(fastapi_source)) as fastapi_base,
        sessionapps.werkzeug_thread(_run(flask_source)) as flask_base,
    ):
        with httpx.Client(base_url=fastapi_base) as user:
            assert user.post("/login?name=alice&password=nope").status_code == 401
            assert user.post("/login?name=alice&password=wonderland").json() == {"ok": True}
            assert user.post("/cart?item=tea").json() == {"cart": ["tea"]}
            cookies = {"session": user.cookies["session"]}
        with httpx.Client(base_url=flask_base, cookies=cookies) as same_user:
            assert same_user.post("/cart?item=cake").json() == {"cart": ["tea", "cake"]}
            assert same_user.get("/cart").json() == {"user": "alice", "cart": ["tea", "cake"]}
        with httpx.Client(base_url=flask_base) as laptop:
            laptop.post("/login?name=alice&password=wonderland")
            assert laptop.post("/logout-everywhere").json() == {"ended": 2}
        with httpx.Client(base_url=fastapi_base, cookies=cookies) as user:
            assert user.get("/cart").json() == {"user": None, "cart": []}
