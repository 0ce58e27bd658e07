"""Session views answering JSON: which worker process answered, and the session it saw.

`?wait=MS` holds the request that long after reading the session and before changing it,
so two requests sent together overlap, each in a worker of its own (a sync worker serves
one request at a time)."""

from __future__ import annotations

import os
import time

from django.http import HttpRequest, JsonResponse


def _answer(request: HttpRequest, seen: dict[str, object]) -> JsonResponse:
    return JsonResponse({"pid": os.getpid(), "seen": seen, "now": dict(request.session.items())})


def _held(request: HttpRequest) -> dict[str, object]:
    seen = dict(request.session.items())
    time.sleep(int(request.GET.get("wait", "0")) / 1000)
    return seen


def state(request: HttpRequest) -> JsonResponse:
    return _answer(request, _held(request))


def put(request: HttpRequest) -> JsonResponse:
    seen = _held(request)
    for name, value in request.GET.items():
        if name != "wait":
            request.session[name] = value
    return _answer(request, seen)


def login(request: HttpRequest) -> JsonResponse:
    """What django.contrib.auth.login() does to the session: a new id, then the user."""
    seen = _held(request)
    request.session.cycle_key()
    request.session["user"] = request.GET["user"]
    return _answer(request, seen)


def logout(request: HttpRequest) -> JsonResponse:
    seen = _held(request)
    request.session.flush()
    return _answer(request, seen)
