"""`seawall server`: one real server on a loopback port until Ctrl-C or SIGTERM."""

from __future__ import annotations

import click


@click.command(
    help="Starts one server (a redis-server or valkey-server on PATH, else the embedded "
    "valkey), prints its URL, and stops it on Ctrl-C or SIGTERM.",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help="port to listen on (default: a free one)",
)
def command(port: int | None) -> int:
    # serve() handles Ctrl-C and SIGTERM itself and stops the server before it returns.
    from seawall.launcher import serve

    serve(port, announce=lambda url: print(url, flush=True))
    return 0
