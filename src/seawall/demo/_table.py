"""The demo's tables, printed through rich: one `rich.table.Table` per scenario.

Scenarios build a `Table` (data only) and `render` turns it into a rich renderable: the
title and intro above the grid, the notes under it. `Style` decides colour and width from
the output stream, so the same table prints plain into a pipe or a test and coloured on a
terminal.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Literal, TextIO

from rich.console import Console, Group, RenderableType
from rich.table import Table as RichTable
from rich.text import Text

Tone = Literal["good", "bad", "dim"]
Align = Literal["<", ">"]

# Into a pipe or a file the layout is this wide (as the operations commands' tables), so
# that rows fit on one line and scripts read them; a terminal narrower than this gets its
# own width, a wider one no more than this (long notes read badly on 200 columns).
PIPE_WIDTH = 120

_TONES = {"good": "green", "bad": "red", "dim": "dim"}


@dataclass(frozen=True)
class Column:
    header: str
    align: Align = "<"
    wrap: bool = False  # the one column that takes the leftover width and wraps


@dataclass(frozen=True)
class Cell:
    text: str
    tone: Tone | None = None


@dataclass
class Table:
    """One scenario's result: a title, a few lines of setup, rows, and notes under it.

    A note that starts with a space is printed as is (code); other notes are wrapped.
    """

    title: str
    columns: list[Column]
    intro: list[str] = field(default_factory=list)
    rows: list[list[str | Cell]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, *cells: str | Cell) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(
                f"row has {len(cells)} cells, table {self.title!r} has {len(self.columns)} columns"
            )
        self.rows.append(list(cells))


@dataclass(frozen=True)
class Style:
    colour: bool = False
    width: int = PIPE_WIDTH

    @classmethod
    def for_stream(cls, stream: TextIO) -> Style:
        """Colour only on a terminal that wants it (https://no-color.org); $COLUMNS wins."""
        tty = stream.isatty()
        colour = tty and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"
        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit() and int(columns) > 0:
            width = int(columns)
        elif tty:
            width = min(PIPE_WIDTH, shutil.get_terminal_size((PIPE_WIDTH, 24)).columns)
        else:
            width = PIPE_WIDTH
        return cls(colour=colour, width=width)

    def console(self, stream: TextIO) -> Console:
        """A console that writes `stream` at this width, with colour only if asked."""
        # No markup or highlighting: cells such as `seawall.Lock(r, name, ttl=1.0)` or
        # `[0-9]` are printed as they are. Without colour there is no colour system at
        # all, so not even FORCE_COLOR puts escape codes into a pipe.
        return Console(
            file=stream,
            width=self.width,
            color_system="standard" if self.colour else None,
            force_terminal=self.colour,
            markup=False,
            highlight=False,
            emoji=False,
        )


def _cell(value: str | Cell) -> Text:
    cell = value if isinstance(value, Cell) else Cell(value)
    return Text(cell.text, style=_TONES[cell.tone] if cell.tone else "")


def render(table: Table, *, number: int | None = None) -> RenderableType:
    """The table as one rich renderable: title and intro, the grid, then the notes."""
    title = Text(table.title if number is None else f"{number}. {table.title}", style="bold")
    for line in table.intro:
        title.append("\n" + line, style="not bold")
    wraps = any(column.wrap for column in table.columns)
    grid = RichTable(
        title=title,
        # "default", not "left": a left-justified title is padded with trailing spaces.
        title_justify="default",
        # The wrapping column takes whatever width the others leave (ratio), so the
        # fixed columns never wrap and the notes use the whole line.
        expand=wraps,
        # Lines between rows: a wrapped cell would otherwise run into the next row.
        show_lines=wraps,
    )
    for column in table.columns:
        grid.add_column(
            column.header,
            justify="right" if column.align == ">" else "left",
            no_wrap=not column.wrap,
            ratio=1 if column.wrap else None,
            overflow="fold" if column.wrap else "ellipsis",
        )
    for row in table.rows:
        grid.add_row(*(_cell(value) for value in row))
    parts: list[RenderableType] = [grid]
    if table.notes:
        parts.append(Text())
    for note in table.notes:
        # A note that starts with a space is code: kept as it is, not wrapped at spaces.
        parts.append(Text(note, no_wrap=note.startswith(" "), overflow="fold"))
    return Group(*parts)


def seconds(value: float) -> str:
    return f"{value:.1f} s"
