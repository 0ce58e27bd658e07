"""Plain-text tables for the demo: fixed columns, one wrapping column, optional colour.

Scenarios build a `Table` (data only) and `render` turns it into lines that fit the
terminal. Colour is decided by the caller, so the same table prints plain into a pipe or a
test and coloured on a terminal.
"""

from __future__ import annotations

import os
import shutil
import textwrap
from dataclasses import dataclass, field
from typing import Literal, TextIO

Tone = Literal["good", "bad", "dim"]
Align = Literal["<", ">"]

# Output stays readable in 80-100 column terminals: never wider, and never squeezed below
# what the fixed columns need.
MIN_WIDTH = 80
MAX_WIDTH = 100

_ANSI = {"good": "\033[32m", "bad": "\033[31m", "dim": "\033[2m", "bold": "\033[1m"}
_RESET = "\033[0m"
_GAP = "  "
_INDENT = "  "


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
    width: int = MAX_WIDTH

    @classmethod
    def for_stream(cls, stream: TextIO) -> Style:
        """Colour only on a terminal that wants it (https://no-color.org)."""
        tty = stream.isatty()
        colour = tty and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"
        # Honours $COLUMNS, then the terminal; a pipe gets MAX_WIDTH.
        columns = shutil.get_terminal_size((MAX_WIDTH, 24)).columns
        return cls(colour=colour, width=max(MIN_WIDTH, min(MAX_WIDTH, columns)))

    def paint(self, text: str, tone: Tone | Literal["bold"] | None) -> str:
        if not self.colour or tone is None or not text:
            return text
        return f"{_ANSI[tone]}{text}{_RESET}"


def _cell(value: str | Cell) -> Cell:
    return value if isinstance(value, Cell) else Cell(value)


def _column_widths(table: Table, width: int) -> list[int]:
    widths = [len(column.header) for column in table.columns]
    for row in table.rows:
        for index, value in enumerate(row):
            longest = max((len(line) for line in _cell(value).text.splitlines()), default=0)
            widths[index] = max(widths[index], longest)
    wrapping = [i for i, column in enumerate(table.columns) if column.wrap]
    if wrapping:
        index = wrapping[0]
        fixed = sum(w for i, w in enumerate(widths) if i != index)
        room = width - len(_INDENT) - fixed - len(_GAP) * (len(widths) - 1)
        widths[index] = max(len(table.columns[index].header), min(widths[index], room), 16)
    return widths


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for paragraph in text.splitlines() or [""]:
        lines.extend(textwrap.wrap(paragraph, width, break_on_hyphens=False) or [""])
    return lines


def _format_row(cells: list[Cell], table: Table, widths: list[int], style: Style) -> list[str]:
    columns = table.columns
    wrapped = [
        _wrap(cell.text, width) if column.wrap else cell.text.splitlines() or [""]
        for cell, column, width in zip(cells, columns, widths, strict=True)
    ]
    height = max(len(lines) for lines in wrapped)
    out: list[str] = []
    for line_no in range(height):
        parts: list[str] = []
        for cell, column, width, lines in zip(cells, columns, widths, wrapped, strict=True):
            text = lines[line_no] if line_no < len(lines) else ""
            padded = f"{text:{column.align}{width}}"
            parts.append(style.paint(padded, cell.tone) if text else padded)
        out.append((_INDENT + _GAP.join(parts)).rstrip())
    return out


def render(table: Table, style: Style, *, number: int | None = None) -> list[str]:
    """The table as lines no wider than `style.width` (except unbreakable cells)."""
    title = table.title if number is None else f"{number}. {table.title}"
    lines = [style.paint(title, "bold")]
    for text in table.intro:
        lines.extend(_INDENT + line for line in _wrap(text, style.width - len(_INDENT)))
    lines.append("")
    widths = _column_widths(table, style.width)
    header = [Cell(column.header) for column in table.columns]
    lines.extend(_format_row(header, table, widths, style))
    lines.append(_INDENT + _GAP.join("-" * width for width in widths))
    for row in table.rows:
        lines.extend(_format_row([_cell(value) for value in row], table, widths, style))
    if table.notes:
        lines.append("")
    for note in table.notes:
        if note.startswith(" "):
            lines.append(_INDENT + note)
        else:
            lines.extend(
                textwrap.wrap(
                    note,
                    style.width,
                    initial_indent=_INDENT,
                    subsequent_indent=_INDENT * 2,
                    break_on_hyphens=False,
                )
                or [""]
            )
    return lines


def seconds(value: float) -> str:
    return f"{value:.1f} s"
