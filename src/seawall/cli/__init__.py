"""The `seawall` command: one click group, one module per command (pip's layout).

Commands are listed in `COMMANDS` as module paths and imported only when run, so
`seawall --help` and `seawall slot` start fast and an optional extra that one command
needs never breaks the others.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

import click

from seawall import __version__
from seawall.cli import _ops
from seawall.errors import SeawallError

# name -> (module, one-line help). Each module defines `command`, a click.Command.
COMMANDS: dict[str, tuple[str, str]] = {
    "bigkeys": ("seawall.cli.bigkeys", "the keys that take the most memory, per-type totals"),
    "delete": ("seawall.cli.delete", "delete keys by pattern without blocking the server"),
    "doctor": ("seawall.cli.doctor", "audit a live server against the guidelines"),
    "hotkeys": ("seawall.cli.hotkeys", "the most-read keys (LFU, HOTKEYS or seawall.Cache)"),
    "slot": ("seawall.cli.slot", "the Cluster hash slot of each key (no server needed)"),
    "stats": ("seawall.cli.stats", "hit rate, ops/s, memory, evictions, top commands, lag"),
    "demo": (
        "seawall.cli.demo",
        "run real scenarios on a private server and show what goes wrong without seawall",
    ),
    "follow": (
        "seawall.cli.follow",
        "invalidate cached rows from the database's change log (PostgreSQL, MariaDB)",
    ),
    "lint": ("seawall.cli.lint", "check Python code using redis-py for unsafe commands"),
    "server": ("seawall.cli.server", "start one real redis/valkey server until Ctrl-C"),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        command = importlib.import_module(entry[0]).command
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Help lines come from the table: listing commands imports none of them.
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, "--version", prog_name="seawall", message="%(prog)s %(version)s")
def cli() -> None:
    """Locks, caches and inventory that stay correct when many processes share a
    database through Redis."""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    command = next((a for a in args if not a.startswith("-")), "seawall")
    _ops.INVOKED[:] = args
    try:
        code = cli.main(args, prog_name="seawall", standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        print("interrupted", file=sys.stderr)
        return 130
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except SeawallError as exc:  # no server binary, a server that would not start, ...
        print(f"seawall {command}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`seawall demo | head`): say nothing more, and keep the
        # interpreter from complaining when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
