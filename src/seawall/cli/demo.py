"""`seawall demo`: the scenarios of `seawall.demo` on a private server."""

from __future__ import annotations

import click


@click.command(
    help="Starts a private server and 8 worker processes, then runs each scenario (a shared "
    "counter under no lock, the SETNX+EXPIRE recipe and seawall.Lock; a holder frozen past "
    "its lease; a cache stampede; a flash sale) and prints a table per scenario.",
)
@click.option("--quick", is_flag=True, help="a smaller run (a few seconds), for tests and CI")
def command(quick: bool) -> int:
    from seawall import demo

    return demo.run(quick=quick)
