"""The operations commands' smaller edges: --explain without a server, resume hints that
repeat the whole command, one key said as "1 key", JSON for no match, long key names told
apart by their ends."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from seawall.cli._ops import resume_command
from tests.ops._run import seawall


def test_doctor_explain_needs_no_url(capsys: pytest.CaptureFixture[str]) -> None:
    run = seawall(capsys, "doctor", "--explain", "sd022")
    assert run.code == 0, run.err
    assert run.out.startswith("SD022 long-key-names")
    missing = seawall(capsys, "doctor")
    assert missing.code == 2 and "give the URL of the server to audit" in missing.err


def test_resume_hint_repeats_the_whole_command() -> None:
    args = ["bigkeys", "redis://app:s3cret@10.0.0.5:6380/2", "--pattern", "user:*"]
    hint = resume_command([*args, "--type", "hash", "--cursor", "17"], "42")
    assert hint == (
        "seawall bigkeys redis://app:PASSWORD@10.0.0.5:6380/2 --pattern 'user:*' "
        "--type hash --cursor 42"
    )
    assert "s3cret" not in hint
    assert resume_command(["delete", "redis://h:1", "--cursor=9", "--yes"], "0") == (
        "seawall delete redis://h:1 --yes --cursor 0"
    )


def test_one_key_is_one_key_and_json_of_no_match_is_empty(
    seawall_redis: redis.Redis, seawall_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    seawall_redis.set("solo:1", "x")
    dry = seawall(capsys, "delete", seawall_url, "--pattern", "solo:*", "--dry-run")
    assert dry.code == 0, dry.err
    assert "1 key matches 'solo:*'" in dry.out
    done = seawall(capsys, "delete", seawall_url, "--pattern", "solo:*", "--yes")
    assert "deleted 1 key matching 'solo:*'" in done.out
    big = seawall(capsys, "bigkeys", seawall_url, "--pattern", "none:*", "--json")
    assert big.code == 0 and big.json() == []
    gone = seawall(capsys, "delete", seawall_url, "--pattern", "none:*", "--yes", "--json")
    assert gone.code == 0 and gone.json()["matched"] == 0
    # Without --json, no match is still said in one line.
    assert seawall(capsys, "bigkeys", seawall_url, "--pattern", "none:*").code == 1


def test_long_key_names_are_told_apart_by_their_ends(
    seawall_redis: redis.Redis, seawall_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = "https://shop.example.com/catalogue/search?" + "q=shoes&" * 20
    for tail in ("page=1", "page=2"):
        seawall_redis.set(prefix + tail, 1)
    run = seawall(capsys, "doctor", seawall_url, "--json")
    messages: list[Any] = [f["message"] for f in run.json()["findings"] if f["rule"] == "SD022"]
    assert len(messages) == 2
    assert any(m.endswith("page=1") for m in messages)
    assert any(m.endswith("page=2") for m in messages)
