"""pytest plugin that runs python-etcd3's own lock tests with seawall.etcd.Lock.

Loaded by test_cp_lock_peer_suites.py (`-p etcd3suite_plugin`) into a pytest run of
tests/test_etcd3.py from python-etcd3's sdist (its etcd3/ beside it, so tests and client
are of one release). python-etcd3's tests are not changed; the plugin:

- appends $SEAWALL_ETCD3_SUITE_DEPS to sys.path: python-etcd3's own requirements and its
  tests' (grpcio, protobuf 3, tenacity, six, hypothesis, mock), after the virtualenv's
  packages;
- makes `Etcd3Client.lock(name, ttl)` an adapter (SeawallEtcdLock) over
  seawall.etcd.Lock on the same etcd ($PYTHON_ETCD_HTTP_URL, which python-etcd3's `etcd`
  fixture also connects to over gRPC, so `etcd.get(lock.key)` reads seawall's key with
  python-etcd3's own client);
- stands in for the `etcdctl` command that the fixture runs after each test to empty the
  store under "/", when it is not installed: the same two calls (del and get with
  --prefix) through python-etcd3's client.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

sys.path.append(os.environ["SEAWALL_ETCD3_SUITE_DEPS"])

import etcd3.client
from peersuites import outcome_recorder

import seawall.etcd
from seawall.errors import LockNotOwnedError
from tests import test_etcd3

ENDPOINT = os.environ["PYTHON_ETCD_HTTP_URL"]

pytest_runtest_logreport, pytest_sessionfinish = outcome_recorder()


class SeawallEtcdLock:
    """etcd3.Lock's API (those of its parts seawall has) over one seawall.etcd.Lock."""

    def __init__(self, name: str, ttl: int = 60, etcd_client: Any = None) -> None:
        self.name = name
        self.ttl = ttl
        self.etcd_client = etcd_client
        self.lock = seawall.etcd.Lock(ENDPOINT, name, ttl=float(ttl))
        # python-etcd3 has one key per lock ('/locks/' + name); seawall one per hold,
        # under the lock's prefix: `key` is the key of the latest hold.
        self.key = self.lock.prefix

    def acquire(self, timeout: float | None = 10) -> bool:
        gotten = self.lock.acquire(timeout=timeout)
        if gotten:  # the hold's key: the one whose create revision is its fence
            for _, meta in self.etcd_client.get_prefix(self.lock.prefix):
                if meta.create_revision == self.lock.fence:
                    self.key = meta.key.decode()
        return gotten

    def release(self) -> bool:
        try:  # python-etcd3 answers False where seawall raises
            self.lock.release()
        except LockNotOwnedError:
            return False
        return True

    def is_acquired(self) -> bool:
        return self.lock.owned()

    def __enter__(self) -> SeawallEtcdLock:
        self.acquire()
        return self

    def __exit__(self, *_: object) -> None:
        self.release()


def _lock(self: Any, name: str, ttl: int = 60) -> SeawallEtcdLock:
    return SeawallEtcdLock(name, ttl=ttl, etcd_client=self)


etcd3.Etcd3Client.lock = _lock  # type: ignore[method-assign]


def _etcdctl(*args: str) -> dict[str, Any]:
    """etcdctl -w json {del|get} --prefix KEY, through python-etcd3's client."""
    command, flag, prefix = args
    assert flag == "--prefix", args
    url = ENDPOINT.rsplit(":", 1)
    with etcd3.client(host=url[0].rsplit("/", 1)[1], port=int(url[1])) as client:
        if command == "del":
            client.delete_prefix(prefix)
            return {}
        found = list(client.get_prefix(prefix))
    return {"kvs": [{"key": meta.key.decode()} for _, meta in found]} if found else {}


if shutil.which("etcdctl") is None:
    test_etcd3.etcdctl = _etcdctl
