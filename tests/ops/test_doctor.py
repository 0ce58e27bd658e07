"""`seawall doctor` on real servers: each rule fires on a server set up to break it, and a
server set up by the guidelines passes with exit status 0."""

from __future__ import annotations

from typing import Any

import pytest

from seawall.ops.doctor import RULES
from tests.ops._run import seawall

GOOD = [
    "--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lfu",
    "--lazyfree-lazy-eviction", "yes", "--lazyfree-lazy-expire", "yes",
    "--lazyfree-lazy-server-del", "yes", "--latency-monitor-threshold", "100",
    "--rename-command", "KEYS", "", "--rename-command", "FLUSHALL", "",
    "--rename-command", "FLUSHDB", "",
]  # fmt: skip


def _url(server: Any) -> str:
    return f"redis://127.0.0.1:{server.port}/0"


def _by_rule(findings: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for finding in findings:
        out.setdefault(finding["rule"], []).append(finding)
    return out


def test_a_default_server_fails_with_named_settings_and_keys(
    seawall_server_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server = seawall_server_factory(extra_args=["--slowlog-log-slower-than", "0"])
    r = server.client()
    r.hset("cart:big", mapping={f"sku{i}": i for i in range(6000)})
    r.set("blob:1", "x" * 20_000)
    r.set("k" * 200, 1)
    for i in range(50):
        r.set(f"session:{i}", i, ex=600)
        r.set(f"user:{i}", i)
    r.hgetall("cart:big")  # an O(N) command, now in the slow log
    run = seawall(capsys, "doctor", _url(server), "--json")
    assert run.code == 1, run.err  # errors present: CI fails
    found = _by_rule(run.json()["findings"])
    for finding in run.json()["findings"]:
        assert set(finding) >= {"rule", "severity", "message", "guideline", "fix"}
        assert finding["severity"] in ("info", "warning", "error")
    assert found["SD001"][0]["severity"] == "error" and "maxmemory" in found["SD001"][0]["message"]
    dangerous = " ".join(f["message"] for f in found["SD010"])
    assert all(name in dangerous for name in ("KEYS", "FLUSHALL", "FLUSHDB", "CONFIG"))
    assert "lazyfree-lazy-eviction" in found["SD003"][0]["message"]
    big = " ".join(f["message"] for f in found["SD020"])
    assert "cart:big (hash, 6,000 elements)" in big and "blob:1 (string, 20,000 bytes)" in big
    no_ttl = " ".join(f["message"] for f in found["SD021"])
    assert "50 of 50 keys user:* " in no_ttl
    assert "user:*" in no_ttl and "session:*" not in no_ttl
    assert "k" * 48 + "..." + "k" * 24 in found["SD022"][0]["message"]
    assert "HGETALL" in " ".join(f["message"] for f in found["SD011"])
    assert "Alibaba" in found["SD020"][0]["guideline"]
    assert "latency monitor is off" in found["SD012"][0]["message"]
    assert "no persistence" in found["SD030"][0]["message"]
    assert "has no replica" in found["SD031"][0]["message"]
    assert "SD032" not in found
    r.config_set("client-output-buffer-limit", "pubsub 0 0 0")
    again = _by_rule(
        seawall(capsys, "doctor", _url(server), "--json", "--no-keys").json()["findings"]
    )
    assert "pub/sub client output buffers are unbounded" in again["SD032"][0]["message"]
    assert "SD020" not in again  # --no-keys: no key scan
    table = seawall(capsys, "doctor", _url(server))
    assert table.code == 1 and "SD001" in table.out and "maxmemory-unset" in table.out
    r.close()


def test_a_server_set_up_by_the_guidelines_passes(
    seawall_server_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server = seawall_server_factory(extra_args=GOOD)
    client = server.client()
    client.set("user:1", "ok", ex=60)
    run = seawall(capsys, "doctor", _url(server), "--json")
    assert run.code == 0, run.out
    found = _by_rule(run.json()["findings"])
    assert not {"SD001", "SD002", "SD003", "SD020", "SD021"} & set(found)
    # CONFIG stays for the doctor's own user; test servers enable DEBUG on purpose.
    assert [f["message"].split(" ", 1)[0] for f in found["SD010"]] == ["CONFIG", "DEBUG"]
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("replica-read-only", "no")
    found = _by_rule(seawall(capsys, "doctor", _url(server), "--json").json()["findings"])
    assert found["SD002"][0]["severity"] == "warning" and "SD031" in found
    client.close()


def test_acl_denied_commands_and_a_user_in_the_url(
    seawall_server_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    server = seawall_server_factory(extra_args=GOOD[:-9])
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", "default", "off")
    admin.execute_command("ACL", "SETUSER", "ops", "on", ">s3cret", "~*", "&*", "+@all")
    admin.execute_command(
        "ACL", "SETUSER", "app", "on", ">apppw", "~*", "+@all", "-@dangerous", "-keys"
    )
    url = f"redis://ops:s3cret@127.0.0.1:{server.port}/0"
    found = _by_rule(seawall(capsys, "doctor", url, "--json").json()["findings"])
    messages = " ".join(f["message"] for f in found["SD010"])
    assert "ACL users ops" in messages and "app" not in messages
    admin.close()


def test_cluster_balance_and_rule_docs(
    seawall_cluster: Any, seawall_cluster_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    pipe = seawall_cluster_client.pipeline()
    for i in range(1500):
        pipe.set(f"{{tenant}}:{i}", i)  # one hash tag: every key on one master
    pipe.execute()
    run = seawall(capsys, "doctor", seawall_cluster.url, "--json")
    found = _by_rule(run.json()["findings"])
    assert not [f for f in found.get("SD033", []) if f["severity"] == "error"]
    [imbalance] = [f for f in found["SD033"] if "over twice the mean" in f["message"]]
    assert "1,500 keys" in imbalance["message"]
    for rule in RULES:
        assert rule.code.startswith("SD") and "Fix:" in rule.rationale and rule.guideline
    explained = seawall(capsys, "doctor", seawall_cluster.url, "--explain", "sd020")
    assert explained.code == 0 and "5,000 elements" in explained.out


def test_memory_doctor_advice_after_a_peak(
    seawall_server_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """260 MB written, 150 MB freed: the allocator keeps the peak and MEMORY DOCTOR says so.
    (The process's RSS is then twice its used memory, yet the server's
    mem_fragmentation_ratio reads 1.03: it leaves out the allocator's retained pages, so a
    peak does not trip SD004; only fragmentation among live objects does.)"""
    server = seawall_server_factory()
    r = server.client()
    blob = b"x" * 1_000_000
    for start in range(0, 260, 20):
        pipe = r.pipeline(transaction=False)
        for i in range(start, start + 20):
            pipe.set(f"blob:{i}", blob)
        pipe.execute()
    r.delete(*(f"blob:{i}" for i in range(150)))
    found = _by_rule(
        seawall(capsys, "doctor", _url(server), "--json", "--no-keys").json()["findings"]
    )
    assert "Peak memory" in found["SD005"][0]["message"], found.get("SD005")
    assert found["SD005"][0]["severity"] == "warning"
    r.close()
