"""The fork server that the process-heavy lock tests start their child processes from.

A fresh interpreter ("spawn") costs about 1 CPU-second of imports (seawall, redis-py) before
it does anything: the RWLock ledger's 20 processes alone cost 20 CPU-seconds, 20-30 s on a
shared 2-core machine. A fork server is one fresh interpreter too (nothing of pytest's
threads or sockets is inherited, which is why the suite avoids "fork"); it imports seawall
once and forks every child from it, in milliseconds. Children started together then also
contend together, instead of one after the other as their imports finish.

The preload list is process-wide and read when the server starts, so it is set here only,
for every test module that forks (a list of a module's own would replace it); children
import whatever it lacks themselves, so any list is correct, this one is only the
cheapest for these tests.
"""

from __future__ import annotations

import multiprocessing

FORKSERVER = multiprocessing.get_context("forkserver")
FORKSERVER.set_forkserver_preload(
    [
        "seawall",
        "seawall.aio",
        "redis.cluster",
        "redis.asyncio.cluster",
        "lockworkers",
        "cplockworkers",
    ]
)
