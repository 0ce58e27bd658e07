"""Finding the MariaDB binaries for the private test server."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from seawall.errors import ServerNotFoundError
from seawall.launcher import _mariadb


def _executable(path: Path) -> None:
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_missing_binaries_name_the_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_mariadb, "_FALLBACK_DIRS", ())
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv(_mariadb.ENV_VAR, raising=False)
    with pytest.raises(ServerNotFoundError, match=r"apt-get install mariadb-server"):
        _mariadb.find_mariadb_binaries()


def test_the_variable_wins_and_finds_the_tools_beside_sbin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sbin").mkdir()
    (tmp_path / "bin").mkdir()
    _executable(tmp_path / "sbin" / "mariadbd")
    _executable(tmp_path / "bin" / "mariadb-install-db")
    monkeypatch.setenv(_mariadb.ENV_VAR, str(tmp_path / "sbin" / "mariadbd"))
    found = _mariadb.find_mariadb_binaries()
    assert found.server == os.path.join(tmp_path, "sbin", "mariadbd")
    assert found.install_db == os.path.join(tmp_path, "bin", "mariadb-install-db")
