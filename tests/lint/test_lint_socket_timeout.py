"""SW008's advice must not break a client that blocks: its socket timeout has to be
above the block time of its BLPOP/BRPOP/XREAD BLOCK."""

from __future__ import annotations

from seawall.lint import lint_source

HEADER = "import redis\nr = redis.Redis()\n"


def _message(body: str) -> str:
    [finding] = [f for f in lint_source(HEADER + body) if f.rule == "SW008"]
    return finding.message


def test_a_file_without_blocking_commands_still_hears_about_them() -> None:
    message = _message("r.get('k')\n")
    assert "pass socket_timeout=<seconds>" in message
    assert "above the block time of any BLPOP/BRPOP/BLMOVE/XREAD BLOCK" in message


def test_the_longest_block_time_sets_the_floor() -> None:
    message = _message("r.blpop(['jobs'], timeout=3)\nr.xread({'s': '$'}, block=20_000)\n")
    assert "XREAD (line 4, 20 s)" in message
    assert "pass socket_timeout=25 or more" in message
    assert "fails with TimeoutError" in message


def test_block_forever_cannot_fit_under_any_socket_timeout() -> None:
    message = _message("r.brpop(['jobs'])\n")
    assert "BRPOP (line 3) blocks forever" in message
    assert "give it a finite timeout in a loop" in message


def test_a_block_time_the_linter_cannot_read_is_still_named() -> None:
    message = _message("def work(wait):\n    r.blmove('a', 'b', wait)\n")
    assert "block time of this file's BLMOVE (line 4)" in message
