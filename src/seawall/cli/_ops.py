"""Options and output shared by the operations commands (stats, bigkeys, hotkeys, delete,
doctor): one decorator per option family, so every command spells them the same way."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import click

_F = TypeVar("_F", bound=Callable[..., Any])

URL_HELP = (
    "URL is redis://[USER:PASSWORD@]HOST:PORT[/DB] (rediss:// for TLS). A Redis Cluster "
    "node's URL covers every master of the cluster."
)


def url_argument(f: _F) -> _F:
    return click.argument("url", metavar="URL")(f)


def json_option(f: _F) -> _F:
    return click.option("--json", "as_json", is_flag=True, help="print JSON for scripts")(f)


def replica_option(f: _F) -> _F:
    return click.option(
        "--replica", is_flag=True, help="read from a replica of each master (where one is up)"
    )(f)


def scan_options(f: _F) -> _F:
    """--pattern, --type, --max-ops, --count and --cursor for commands that SCAN."""
    for decorator in reversed(
        [
            click.option(
                "--pattern", default=None, help="only keys matching this glob (SCAN MATCH)"
            ),
            click.option(
                "--type",
                "type_",
                type=click.Choice(["string", "list", "set", "zset", "hash", "stream"]),
                default=None,
                help="only keys of this type (SCAN TYPE)",
            ),
            click.option(
                "--max-ops",
                type=click.FloatRange(min=0, min_open=True),
                default=None,
                help="at most N ops/s on each server (SCAN, and one per key looked at); "
                "default: no limit beyond one batch in flight",
            ),
            click.option(
                "--count",
                type=click.IntRange(10, 10_000),
                default=1000,
                show_default=True,
                help="keys per SCAN batch",
            ),
            click.option(
                "--cursor",
                default=None,
                help="resume an interrupted scan from the cursor it printed",
            ),
        ]
    ):
        f = decorator(f)
    return f


# The arguments the running command was given (`main` sets them): a resume hint repeats
# them with the cursor.
INVOKED: list[str] = []


def interrupted(cursor: str | None, url: str, command: str) -> int:
    """Say how to resume after Ctrl-C; the exit status (130, as a shell reports SIGINT)."""
    if cursor is None:
        click.echo(f"seawall {command}: interrupted after the last batch", err=True)
    else:
        click.echo(
            f"seawall {command}: interrupted; resume with: "
            f"{resume_command(INVOKED or [command, url], cursor)}",
            err=True,
        )
    return 130


def resume_command(args: list[str], cursor: str) -> str:
    """The command line `args` ran, with `--cursor cursor` instead of any cursor it had
    and any password in a URL shown as PASSWORD (the hint goes to a terminal or a log)."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--cursor":
            skip = True
        elif not arg.startswith("--cursor="):
            kept.append(_hide_password(arg))
    return shlex.join(["seawall", *kept, "--cursor", cursor])


def _hide_password(arg: str) -> str:
    parts = urlsplit(arg)
    if parts.scheme not in ("redis", "rediss") or parts.password is None:
        return arg
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:PASSWORD@{host}"))


def no_terminal() -> bool:
    return not sys.stdin.isatty()
