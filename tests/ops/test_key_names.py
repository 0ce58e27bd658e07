"""Every operations command prints key names exactly as they are: no rich markup
(`[red]x[/red]`), no emoji codes (`:lock:` would print as a padlock, so
`seawall:lock:{orders:42}` would read as another key), in tables and plain lines."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from seawall.launcher import ServerProcess
from tests.ops._run import seawall

# Big enough that bigkeys and doctor's big-key rule list them.
NAMES = ["seawall:lock:{orders:42}", "menu:smile:", "[red]x[/red]:a"]


def _url(server: Any) -> str:
    return f"redis://127.0.0.1:{server.port}/0"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    server = ServerProcess(
        extra_args=["--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lfu"]
    ).start()
    r = server.client()
    for name in NAMES:
        r.set(name, "x" * 20_000)
        for _ in range(5):
            r.get(name)
    r.close()
    yield server
    server.stop()


def _printed_exactly(out: str) -> None:
    for name in NAMES:
        assert name in out, out
    assert "\N{LOCK}" not in out and "\N{SMILING FACE WITH OPEN MOUTH AND SMILING EYES}" not in out


@pytest.mark.parametrize(
    "args",
    [
        ["bigkeys", "--top", "10"],
        ["hotkeys", "--top", "10"],
        ["delete", "--pattern", "*:*", "--dry-run"],
        ["doctor"],
    ],
    ids=lambda a: a[0],
)
def test_commands_print_key_names_exactly(
    args: list[str], server: Any, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # wide enough that no name is folded
    run = seawall(capsys, args[0], _url(server), *args[1:])
    assert run.code in (0, 1), run.err  # doctor exits 1 on findings
    _printed_exactly(run.out)


def test_slot_prints_key_names_exactly(
    capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    run = seawall(capsys, "slot", *NAMES)
    assert run.code == 0, run.err
    _printed_exactly(run.out)


def test_a_narrow_terminal_folds_key_names_never_cuts_them(
    server: Any, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    monkeypatch.setenv("COLUMNS", "60")
    run = seawall(capsys, "bigkeys", _url(server), "--top", "10")
    assert run.code == 0, run.err
    cells = "".join(
        line.split("\N{BOX DRAWINGS LIGHT VERTICAL}")[2].strip()
        for line in run.out.splitlines()
        if line.count("\N{BOX DRAWINGS LIGHT VERTICAL}") > 2
    )
    assert "\N{HORIZONTAL ELLIPSIS}" not in cells
    for name in NAMES:
        assert name in cells, cells
