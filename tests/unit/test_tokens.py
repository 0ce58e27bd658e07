"""Lease tokens of the cache's loads: random, never repeated, one system call per batch."""

from __future__ import annotations

import multiprocessing
import os
import re
import threading
from typing import Any

import pytest

from seawall.shared import _tokens


def test_tokens_are_random_hex_and_never_repeated_across_threads() -> None:
    drawn: list[list[str]] = [[] for _ in range(8)]

    def draw(into: list[str]) -> None:
        for _ in range(2_000):
            into.append(_tokens.token_hex())

    threads = [threading.Thread(target=draw, args=(into,)) for into in drawn]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [token for into in drawn for token in into]
    assert len(set(every)) == len(every) == 16_000
    assert all(re.fullmatch(r"[0-9a-f]{32}", token) for token in every)


def test_one_system_call_serves_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    # os.urandom lets go of the GIL: drawing from it per token made a caller wait its
    # turn for the GIL again whenever other threads wanted it.
    calls: list[int] = []
    urandom = os.urandom

    def counted(size: int) -> bytes:
        calls.append(size)
        return urandom(size)

    monkeypatch.setattr(os, "urandom", counted)
    _tokens._forget()
    for _ in range(3 * _tokens.BATCH):
        _tokens.token_hex()
    assert calls == [16 * _tokens.BATCH] * 3


def _child(pipe: Any) -> None:
    pipe.send(_tokens.token_hex())


def test_a_forked_child_draws_its_own_tokens() -> None:
    _tokens._forget()
    _tokens.token_hex()  # the parent now holds BATCH - 1 drawn tokens
    parent_end, child_end = multiprocessing.Pipe()
    child = multiprocessing.get_context("fork").Process(target=_child, args=(child_end,))
    child.start()
    from_child = parent_end.recv()
    child.join(10)
    ours = {_tokens.token_hex() for _ in range(_tokens.BATCH - 1)}
    assert from_child not in ours
