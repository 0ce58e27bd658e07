"""The `seawall` command: `seawall demo`, `seawall server`, `seawall --version`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from seawall import __version__
from seawall.errors import SeawallError


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"port must be between 1 and 65535, got {port}")
    return port


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seawall",
        description="Locks, caches and inventory that stay correct when many processes "
        "share a database through Redis.",
    )
    parser.add_argument("--version", action="version", version=f"seawall {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = commands.add_parser(
        "demo",
        help="run real scenarios on a private server and print what went wrong without seawall",
        description="Starts a private server and 8 worker processes, then runs each "
        "scenario (a shared counter under no lock, the SETNX+EXPIRE recipe and "
        "seawall.Lock; a holder frozen past its lease) and prints a table per scenario.",
    )
    demo.add_argument(
        "--quick", action="store_true", help="a smaller run (a few seconds), for tests and CI"
    )
    demo.set_defaults(handler=_demo)

    server = commands.add_parser(
        "server",
        help="start one real redis/valkey server and keep it running until Ctrl-C",
        description="Starts one server (a redis-server or valkey-server on PATH, else the "
        "embedded valkey), prints its URL, and stops it on Ctrl-C or SIGTERM.",
    )
    server.add_argument(
        "--port", type=_port, default=None, help="port to listen on (default: a free one)"
    )
    server.set_defaults(handler=_server)
    return parser


def _demo(args: argparse.Namespace) -> int:
    from seawall import demo

    return demo.run(quick=args.quick)


def _server(args: argparse.Namespace) -> int:
    # Imported here: only this command needs the launcher. serve() handles Ctrl-C and
    # SIGTERM itself and stops the server before it returns.
    from seawall.launcher import serve

    serve(args.port, announce=_announce)
    return 0


def _announce(url: str) -> None:
    print(url, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SeawallError as exc:  # no server binary, a server that would not start, ...
        print(f"seawall {args.command}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`seawall demo | head`): say nothing more, and keep the
        # interpreter from complaining when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
