"""The pure decisions of the etcd and ZooKeeper locks: no server needed."""

from __future__ import annotations

import pytest

from seawall.etcd import _core as etcd_core
from seawall.zookeeper import _core as zk_core


def test_etcd_predecessor_is_the_newest_key_created_before_ours() -> None:
    listing = [("p/a", 10), ("p/b", 14), ("p/me", 20), ("p/later", 25)]
    assert etcd_core.predecessor(listing, 20) == "p/b"
    assert etcd_core.predecessor([("p/me", 20)], 20) is None
    assert etcd_core.predecessor([("p/later", 25), ("p/me", 20)], 20) is None


def test_etcd_enqueue_reply_gives_revision_and_the_key_ahead() -> None:
    key = "seawall/lock/x/00000000000000aa"
    reply = {
        "header": {"revision": "31"},
        "succeeded": True,
        "responses": [
            {"response_put": {}},
            {
                "response_range": {
                    "kvs": [
                        {"key": etcd_core.b64(key), "create_revision": "31"},
                        {"key": etcd_core.b64("seawall/lock/x/b"), "create_revision": "12"},
                    ]
                }
            },
        ],
    }
    reply["responses"][1]["response_range"]["count"] = "2"
    assert etcd_core.enqueued(reply, key) == (31, "seawall/lock/x/b", True)
    reply["responses"][1]["response_range"]["count"] = "3"
    assert etcd_core.enqueued(reply, key) == (31, "seawall/lock/x/b", False)
    alone = {
        **reply,
        "responses": [
            {},
            {"response_range": {"kvs": reply["responses"][1]["response_range"]["kvs"][:1]}},
        ],
    }
    assert etcd_core.enqueued(alone, key) == (31, None, False)
    retried = {
        "succeeded": False,
        "responses": [
            {"response_range": {"kvs": [{"key": etcd_core.b64(key), "create_revision": "30"}]}}
        ],
    }
    assert etcd_core.enqueued(retried, key) == (30, "", False)


def test_etcd_recheck_reply_says_when_our_key_is_gone() -> None:
    assert etcd_core.rechecked({"succeeded": False}) == (False, None, False)
    empty = {"succeeded": True, "responses": [{"response_range": {}}, {"response_range": {}}]}
    assert etcd_core.rechecked(empty) == (True, None, False)

    def kvs(*keys: str) -> dict[str, object]:
        return {"response_range": {"kvs": [{"key": etcd_core.b64(k)} for k in keys]}}

    sole = {"succeeded": True, "responses": [kvs("p/a"), kvs("p/a")]}
    assert etcd_core.rechecked(sole) == (True, "p/a", True)
    behind = {"succeeded": True, "responses": [kvs("p/b"), kvs("p/a")]}
    assert etcd_core.rechecked(behind) == (True, "p/b", False)


def test_etcd_prefix_range_covers_exactly_the_prefix() -> None:
    import base64

    end = base64.b64decode(etcd_core.prefix_end("seawall/lock/a/")).decode()
    assert end == "seawall/lock/a0"
    assert end > "seawall/lock/a/zzz"
    assert end < "seawall/lock/ab"


def test_etcd_lease_arithmetic_rounds_up_to_whole_seconds() -> None:
    assert etcd_core.lease_seconds(0.2) == 1
    assert etcd_core.lease_seconds(2.0) == 2
    assert etcd_core.lease_seconds(2.01) == 3
    assert etcd_core.wait_slice(30.0, None) == etcd_core.WAIT_SLICE
    assert etcd_core.wait_slice(3.0, None) == pytest.approx(1.0)
    assert etcd_core.wait_slice(30.0, 0.2) == pytest.approx(0.2)
    lease = etcd_core.new_lease_id()
    assert 0 < lease < 2**62 and etcd_core.lease_of(etcd_core.token_of(lease)) == lease


def test_etcd_watch_messages_that_end_a_wait() -> None:
    outcome = etcd_core.watch_outcome
    assert outcome({"result": {"events": [{"type": "DELETE", "kv": {}}]}}) == etcd_core.DELETED
    assert outcome({"result": {"created": True, "header": {"revision": "9"}}}) is None
    assert outcome({"result": {"events": [{"kv": {}}]}}) is None  # a put
    assert outcome({"result": {"canceled": True}}) == etcd_core.LOOK
    assert outcome({"result": {"compact_revision": "7"}}) == etcd_core.LOOK
    # Created after the store moved past the start: a deletion may wait for etcd's
    # catch-up pass, so look at once (only when asked to).
    created = {"result": {"created": True, "header": {"revision": "10"}}}
    assert outcome(created, 10, look_early=True) == etcd_core.LOOK
    assert outcome(created, 11, look_early=True) is None
    assert outcome(created, 10, look_early=False) is None


def test_zookeeper_predecessor_by_sequence_not_by_name() -> None:
    mine = "n-ffff-0000000012"
    children = ["n-aaaa-0000000011", "n-0000-0000000003", mine, "n-bbbb-0000000020", "other"]
    assert zk_core.predecessor(children, mine) == "n-aaaa-0000000011"
    assert zk_core.predecessor(["n-zz-0000000013", mine], mine) is None
    with pytest.raises(ValueError, match="not a seawall lock node"):
        zk_core.predecessor(children, "other")


def test_zookeeper_names_are_one_node_each() -> None:
    assert zk_core.parent_of("a/b") == "/seawall/lock/a%2Fb"
    assert zk_core.sequence_of("n-ab-0000000042") == 42
    assert zk_core.sequence_of("n-ab-x") is None
    assert zk_core.node_prefix("ab") == "n-ab-"
    with pytest.raises(TypeError, match="connection string"):
        zk_core.check_hosts(None)


def test_import_seawall_needs_neither_extra_and_a_missing_one_names_the_install() -> None:
    import subprocess
    import sys

    script = (
        "import sys\n"
        "import seawall\n"
        "assert 'httpx' not in sys.modules and 'kazoo' not in sys.modules\n"
        "sys.modules['httpx'] = None\n"
        "sys.modules['kazoo'] = None\n"
        "for family, extra in (('etcd', 'etcd'), ('zookeeper', 'zookeeper')):\n"
        "    try:\n"
        "        __import__('seawall.' + family)\n"
        "    except ImportError as exc:\n"
        "        assert f\"pip install 'seawall[{extra}]'\" in str(exc), exc\n"
        "    else:\n"
        "        raise AssertionError(family)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_missing_server_binary_names_the_debian_package() -> None:
    from seawall.errors import ServerNotFoundError
    from seawall.launcher._daemon import find_binary

    with pytest.raises(ServerNotFoundError, match=r"apt-get install -y etcd-server"):
        find_binary(["seawall-no-such-etcd", "/nonexistent/etcd"], "etcd-server", "etcd binary")
