"""A process that used seawall exits: its background threads never hang the interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import Target

# A lock waited for (so the process's wake-up listener thread runs), then the client
# closed under that thread, which reconnects, and the client left in a reference cycle, so
# the garbage collector closes its pool again while the interpreter finalizes. A daemon
# thread frozen there inside the pool's lock used to hang that last close for ever.
SCRIPT = """
import sys, threading, time
import redis
import seawall

r = redis.Redis.from_url(sys.argv[1])
holder = seawall.Lock(r, "exit", ttl=5)
holder.acquire()
waiter = seawall.Lock(r, "exit", ttl=5)
thread = threading.Thread(target=lambda: waiter.acquire(timeout=5) and waiter.release())
thread.start()
time.sleep(0.3)
holder.release()
thread.join()
cycle = [r]
cycle.append(cycle)
r.close()
del r, cycle
"""


def test_a_process_exits_after_closing_its_client_under_the_listener(standalone: Target) -> None:
    # Half of the runs hung before the fix (one after another: run together, they rarely
    # did); all six must exit, each well within 10 s.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    hung = []
    for attempt in range(6):
        run = subprocess.Popen([sys.executable, "-c", SCRIPT, standalone.url], env=env)
        try:
            assert run.wait(10) == 0
        except subprocess.TimeoutExpired:
            hung.append(attempt)
            run.kill()
            run.wait()
    assert not hung, f"runs {hung} of 6 did not exit within 10 s"
