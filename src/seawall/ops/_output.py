"""Thin output helpers shared by the operations commands: rich tables on stdout (colour only
on a terminal), JSON for scripts, a progress bar with ETA on stderr when it is a terminal."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = [
    "counted",
    "emit_json",
    "progress_bar",
    "stderr_console",
    "stdout_console",
    "text_key",
]

# Into a pipe or a file, tables are laid out this wide instead of rich's 80.
_PIPE_WIDTH = 120


def stdout_console() -> Console:
    tty = sys.stdout.isatty()
    columns = os.environ.get("COLUMNS", "")
    width = int(columns) if columns.isdigit() else _PIPE_WIDTH
    # No markup and no emoji codes: key names such as `user:[0-9]*`, `seawall:lock:{x}` or
    # `:smile:` are printed exactly as they are.
    return Console(
        file=sys.stdout,
        highlight=False,
        markup=False,
        emoji=False,
        width=None if tty else width,
    )


def stderr_console() -> Console:
    return Console(file=sys.stderr, highlight=False, markup=False, emoji=False)


def emit_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2) + "\n")
    sys.stdout.flush()


def counted(number: int, noun: str) -> str:
    """`1 key`, `2,000 keys`: a count and its noun, singular for one."""
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


def text_key(key: bytes | str) -> str:
    """A key as text: UTF-8 where it is, escapes for other bytes (never fails)."""
    return key if isinstance(key, str) else key.decode("utf-8", "backslashreplace")


@contextmanager
def progress_bar(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """`update(done)` moves a bar on stderr; nothing is drawn when stderr is not a
    terminal (scripts and tests), so output stays clean."""
    console = stderr_console()
    if not console.is_terminal:
        yield lambda done: None
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("keys"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=max(total, 1))
        yield lambda done: bar.update(task, completed=done)
