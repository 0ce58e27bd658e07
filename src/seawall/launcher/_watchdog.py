"""A sidecar process that kills launched servers if this Python process dies abruptly.

atexit covers normal exits and Ctrl-C, but not SIGKILL, an OOM kill or a CI timeout:
servers would then outlive the run, holding ports and temp dirs. The sidecar holds the
read end of a pipe; the kernel closes the write end however this process dies, and on
that EOF the sidecar kills every server group still registered and deletes its
directory. It needs no prctl, so it works on Linux and macOS alike.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
from typing import IO

__all__ = ["close_watchdog", "unwatch", "watch"]

# Runs with -I -S (no site, no user paths) so it starts in ~10 ms and imports nothing
# of the parent's environment. Protocol, one line each: "+<pgid> <dir>" / "-<pgid>".
_SIDECAR = """
import os, shutil, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
watched = {}
for line in sys.stdin:
    op, _, rest = line.rstrip("\\n").partition(" ")
    if op.startswith("+"):
        watched[int(op[1:])] = rest
    elif op.startswith("-"):
        watched.pop(int(op[1:]), None)
for pgid, directory in watched.items():
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
for directory in watched.values():
    if directory:
        shutil.rmtree(directory, ignore_errors=True)
"""

_lock = threading.Lock()
_sidecar: subprocess.Popen[str] | None = None


def _pipe() -> IO[str] | None:
    global _sidecar
    if _sidecar is None or _sidecar.poll() is not None:
        try:
            _sidecar = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _SIDECAR],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                text=True,
                # Its own session: a terminal Ctrl-C must not take the guard down first.
                start_new_session=True,
            )
        except OSError:
            return None  # best effort: atexit cleanup still applies
    return _sidecar.stdin


def _send(line: str) -> None:
    with _lock:
        pipe = _pipe()
        if pipe is None:
            return
        with contextlib.suppress(OSError, ValueError):
            pipe.write(line + "\n")
            pipe.flush()


def watch(pgid: int, directory: str) -> None:
    """Kill process group `pgid` and delete `directory` if this process dies first."""
    _send(f"+{pgid} {directory}")


def unwatch(pgid: int) -> None:
    """The group has exited and been reaped: its pid may be reused, forget it."""
    if _sidecar is not None:
        _send(f"-{pgid}")


def close_watchdog() -> None:
    """Let the sidecar exit; called at interpreter exit after servers were stopped."""
    global _sidecar
    with _lock:
        sidecar, _sidecar = _sidecar, None
    if sidecar is None:
        return
    with contextlib.suppress(OSError, ValueError):
        if sidecar.stdin is not None:
            sidecar.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        sidecar.wait(2.0)
