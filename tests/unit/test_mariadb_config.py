"""The MariaDB source's URLs, positions and setting checks, without a server."""

from __future__ import annotations

import pytest

from seawall.cdc._events import SourceError
from seawall.cdc._mariadb_config import (
    FilePosition,
    GtidPosition,
    MariaDBURL,
    check_settings,
    parse_position,
    parse_url,
)
from seawall.cdc.mariadb import MariaDBSource

GOOD = {
    "log_bin": "ON",
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
    "binlog_row_metadata": "FULL",
}


def test_urls_of_both_schemes_mean_the_same() -> None:
    url = parse_url("mysql://repl:s%40cret@db.example:3307/shop?server_id=4242")
    assert url == MariaDBURL("repl", "s@cret", "db.example", 3307, "shop", 4242)
    assert parse_url("mariadb://repl:s%40cret@db.example:3307/shop?server_id=4242") == url
    plain = parse_url("mariadb://127.0.0.1/app")
    assert (plain.user, plain.password, plain.port, plain.server_id) == ("root", "", 3306, None)
    assert parse_url("mysql://u@h/app?heartbeat=0.5").heartbeat == 0.5


def test_the_name_is_the_server_and_database() -> None:
    source = MariaDBSource("mysql://u:pw@db.example:3307/shop?server_id=9")
    assert source.name == "mariadb:db.example:3307/shop"
    assert MariaDBSource("mariadb://other@db.example:3307/shop").name == source.name


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("postgresql://u@h/db", "not a MariaDB/MySQL URL"),
        ("mysql://u@h", "names no host or no database"),
        ("mysql://u:hunter2@/db", r"mysql://u:\*\*\*@/db names no host"),
        ("mysql://u@h:99999/db", "bad port"),
        ("mysql://u@h/db?server_id=0", "server_id must be an integer"),
        ("mysql://u@h/db?server_id=x", "server_id must be an integer"),
        ("mysql://u@h/db?heartbeat=0", "heartbeat must be seconds"),
        ("mysql://u@h/db?slot=x", "unknown option 'slot'"),
    ],
)
def test_bad_urls_say_what_is_expected(url: str, message: str) -> None:
    with pytest.raises(SourceError, match=message) as caught:
        parse_url(url)
    assert "hunter2" not in str(caught.value)


def test_gtid_positions_round_trip_and_advance_per_domain() -> None:
    position = parse_position("gtid:0-1-42")
    assert position == GtidPosition(((0, 1, 42),))
    assert str(position) == "gtid:0-1-42"
    assert isinstance(position, GtidPosition)
    moved = position.advance(1, 7, 3).advance(0, 2, 43)
    assert str(moved) == "gtid:0-2-43,1-7-3"
    assert parse_position(str(moved)) == moved
    assert GtidPosition.from_state("").state == ""
    assert str(GtidPosition.from_state("1-1-5, 0-1-9")) == "gtid:0-1-9,1-1-5"


def test_file_positions_round_trip() -> None:
    position = parse_position("file:mysql-bin.000003:1234")
    assert position == FilePosition("mysql-bin.000003", 1234)
    assert str(position) == "file:mysql-bin.000003:1234"


@pytest.mark.parametrize(
    "text",
    ["", "0-1-42", "gtid:0-1", "gtid:0-1-x", "gtid:0-1-2,0-1-3", "file:binlog", "file::12",
     "file:a/b:1", "lsn:0/16B3748"],
)  # fmt: skip
def test_bad_positions_name_both_forms(text: str) -> None:
    with pytest.raises(SourceError, match=r"expected gtid:DOMAIN-SERVER-SEQ .* or file:NAME"):
        parse_position(text)


def test_good_settings_pass() -> None:
    assert check_settings(GOOD, "MariaDB at h:1") is None
    # MySQL 5.7 has no binlog_row_metadata: nothing to require there.
    assert check_settings({k: v for k, v in GOOD.items() if k != "binlog_row_metadata"}, "") is None


@pytest.mark.parametrize(
    ("name", "value", "start"),
    [
        ("log_bin", "OFF", "binary logging is off on MariaDB at h:1; set log_bin"),
        ("binlog_format", "STATEMENT", "binlog_format is STATEMENT on MariaDB at h:1; set "
         "binlog_format=ROW (and binlog_row_image=FULL) in my.cnf [mysqld] and restart"),
        ("binlog_format", "mixed", "binlog_format is MIXED on"),
        ("binlog_row_image", "MINIMAL", "binlog_row_image is MINIMAL on MariaDB at h:1; set "
         "binlog_row_image=FULL"),
        ("binlog_row_image", "NOBLOB", "binlog_row_image is NOBLOB"),
        ("binlog_row_metadata", "MINIMAL", "binlog_row_metadata is MINIMAL"),
        ("binlog_transaction_compression", "ON", "binlog_transaction_compression is ON"),
        ("log_bin_compress", "ON", "log_bin_compress is ON on MariaDB at h:1; set "
         "log_bin_compress=OFF"),
    ],
)  # fmt: skip
def test_each_bad_setting_is_one_line_naming_it_and_the_fix(
    name: str, value: str, start: str
) -> None:
    problem = check_settings({**GOOD, name: value}, "MariaDB at h:1")
    assert problem is not None and problem.startswith(start)
    assert "\n" not in problem
