"""kazoo's and python-etcd3's own lock tests, unchanged, against seawall's CP locks.

peersuites.py fetches the installed kazoo's sdist and runs the tests of its Lock recipe
(KazooLockTests in kazoo/tests/test_lock.py, without its read/write-lock tests: another
recipe) with kazoosuite_plugin.py, which puts seawall.zookeeper.Lock behind kazoo's Lock
API and gives kazoo's harness the private ZooKeeper. It fetches python-etcd3's last sdist
too and runs the lock tests of its tests/test_etcd3.py with etcd3suite_plugin.py, which
puts seawall.etcd.Lock behind python-etcd3's `client.lock()`. Each failure must be listed, with
its reason, in docs/cp-lock-compat.md; a listed test that passes fails this test too, so
the list never goes stale.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

import peersuites
import pytest

KAZOO_SECTION = "kazoo's lock tests that cannot pass"
# kazoo's Lock recipe tests: KazooLockTests less the ReadLock/WriteLock ones.
KAZOO_SELECT = "KazooLockTests and not read_lock and not write_lock and not rw_lock"
# kazoo 2.11 has 13 such tests; far fewer means they were not found.
KAZOO_AT_LEAST = 12

ETCD3_SECTION = "python-etcd3's lock tests that cannot pass"
# python-etcd3's last release (2020); its tests need grpcio, protobuf 3 and these.
ETCD3_RELEASE = "0.12.0"
ETCD3_REQUIREMENTS = [
    "grpcio>=1.27",
    "protobuf>=3.6,<4",
    "tenacity>=6",
    "six>=1.12",
    "hypothesis>=4",
    "mock>=3",
]
# Its lock tests, less two that docs/cp-lock-compat.md says why it does not run.
ETCD3_SELECT = "test_lock and not test_lock_expire and not test_lock_contended"
ETCD3_AT_LEAST = 7


def _check(results: dict[str, str], listed: dict[str, str], at_least: int, what: str) -> None:
    peersuites.check_outcomes(results, listed, at_least, what, "cp-lock-compat.md")


def test_kazoos_own_lock_tests_pass_with_seawall_zookeeper_lock(seawall_zookeeper: Any) -> None:
    try:
        root = peersuites.prepare("kazoo", version("kazoo"), ("kazoo/",))
        results = peersuites.run_pytest(
            root,
            "kazoo/tests/test_lock.py",
            KAZOO_SELECT,
            "kazoosuite_plugin",
            {"SEAWALL_KAZOO_SUITE_HOSTS": seawall_zookeeper.hosts},
        )
    except peersuites.SuiteSetupError as exc:
        pytest.fail(f"cannot run kazoo's lock tests: {exc}", pytrace=False)
    _check(results, peersuites.cannot_pass(KAZOO_SECTION), KAZOO_AT_LEAST, "kazoo's lock tests")


def test_python_etcd3s_own_lock_tests_pass_with_seawall_etcd_lock(seawall_etcd: Any) -> None:
    try:
        root = peersuites.prepare("etcd3", ETCD3_RELEASE, ("etcd3/", "tests/"))
        deps = peersuites.install_into(root / "deps", ETCD3_REQUIREMENTS)
        results = peersuites.run_pytest(
            root,
            "tests/test_etcd3.py",
            ETCD3_SELECT,
            "etcd3suite_plugin",
            {
                "SEAWALL_ETCD3_SUITE_DEPS": str(deps),
                "PYTHON_ETCD_HTTP_URL": seawall_etcd.endpoint,
            },
        )
    except peersuites.SuiteSetupError as exc:
        pytest.fail(f"cannot run python-etcd3's lock tests: {exc}", pytrace=False)
    _check(
        results, peersuites.cannot_pass(ETCD3_SECTION), ETCD3_AT_LEAST, "python-etcd3's lock tests"
    )


@pytest.mark.parametrize("section", [KAZOO_SECTION, ETCD3_SECTION])
def test_each_listed_difference_gives_its_reason(section: str) -> None:
    listed = peersuites.cannot_pass(section)
    assert listed, f"docs/cp-lock-compat.md lists nothing under {section!r}, or its format changed"
    for name, why in listed.items():
        assert len(why) > 20, f"no reason given for {name}"
