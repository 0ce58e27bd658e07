"""The worker processes of tests/test_cache.py, started once for the module: each runs the
functions the test sends (cacheworkers.stampede, absent_requests, ...) one at a time.
A spawned process spends most of its start importing seawall and redis-py; kept, it
starts each run with nothing but the function's own set-up (its client, its threads)."""

from __future__ import annotations

import os
from multiprocessing.connection import Connection
from typing import Any


class Go:
    """Stands in a function's arguments for the process's `go` event (an event is shared
    with a process only when the process starts, so it cannot travel with each call)."""


def serve(go: Any, pipe: Connection) -> None:
    """Run each (function, args) received, `go` in place of Go(); send back (result, None)
    or (None, the error's repr). Ends on None, at once: every answer is sent, and a normal
    exit would wait for the idle threads seawall's pools keep for a few seconds."""
    while True:
        message = pipe.recv()
        if message is None:
            os._exit(0)
        function, args = message
        args = tuple(go if isinstance(arg, Go) else arg for arg in args)
        try:
            pipe.send((function(*args), None))
        except BaseException as exc:
            pipe.send((None, repr(exc)))
