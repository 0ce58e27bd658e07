"""Random tokens (a cache load's lease, a lock hold's owner), drawn from os.urandom a batch
at a time.

Each token is 16 bytes of os.urandom, as `secrets.token_hex(16)` gives, but one system
call serves BATCH of them. That call lets go of the GIL: a flight's leader that draws a
token while its process's other threads are waking (the moment a stampede or a stale
value brings them all) then waits for its turn behind every one of them before it can
send its request. A lock cycle saves the system call too.
"""

from __future__ import annotations

import os

BATCH = 64
_SIZE = 16

_drawn: list[str] = []


def token_hex() -> str:
    """A fresh 32-character hex token, never handed out twice in this process."""
    try:
        return _drawn.pop()  # atomic: threads never get the same one
    except IndexError:
        pass
    text = os.urandom(_SIZE * BATCH).hex()
    width = 2 * _SIZE
    batch = [text[start : start + width] for start in range(0, len(text), width)]
    token = batch.pop()
    _drawn.extend(batch)
    return token


def _forget() -> None:
    # A forked child must not hand out the tokens its parent will.
    _drawn.clear()


os.register_at_fork(after_in_child=_forget)
