"""Free ports are claimed across processes: pytest-xdist workers never share one."""

from __future__ import annotations

import os
from multiprocessing.connection import Connection

from conftest import SPAWN

from seawall.launcher import _ports
from seawall.launcher._ports import pick_free_port, release_port


def _hold_ports(pipe: Connection, bus: bool) -> None:
    # Another test process: claims a port, reports it, holds it until told to go.
    port = pick_free_port(_ports.CLUSTER_MAX_PORT if bus else None, bus=bus)
    pipe.send(port)
    pipe.recv()
    release_port(port)
    pipe.send("released")
    pipe.recv()  # then exits without releasing anything more


def test_a_port_claimed_by_another_process_is_not_handed_out() -> None:
    here, there = SPAWN.Pipe()
    holder = SPAWN.Process(target=_hold_ports, args=(there, True))
    holder.start()
    try:
        assert here.poll(30), "the holder process never claimed a port"
        port = here.recv()
        # Both the port and its cluster bus are claimed by the other process.
        assert not _ports._claim(port, [port])
        assert not _ports._claim(port + 10000, [port + 10000])
        here.send("release")
        assert here.poll(30) and here.recv() == "released"
        assert _ports._claim(port, [port])  # free once the holder released it
        release_port(port)
        assert not os.path.exists(os.path.join(_ports._CLAIM_DIR, str(port)))
        here.send("exit")
    finally:
        holder.join(10)
        if holder.is_alive():
            holder.kill()


def test_a_claim_dies_with_its_process() -> None:
    here, there = SPAWN.Pipe()
    holder = SPAWN.Process(target=_hold_ports, args=(there, False))
    holder.start()
    try:
        assert here.poll(30), "the holder process never claimed a port"
        port = here.recv()
        assert not _ports._claim(port, [port])
    finally:
        holder.kill()
        holder.join(10)
    # SIGKILL gave it no chance to release: the kernel dropped its lock.
    assert _ports._claim(port, [port])
    release_port(port)


def test_ports_claimed_in_this_process_are_distinct() -> None:
    ports = [pick_free_port() for _ in range(50)]
    try:
        assert len(set(ports)) == 50
    finally:
        for port in ports:
            release_port(port)
