"""`--map TABLE=NAMESPACE[:COLUMN]` parsing (pure)."""

from __future__ import annotations

import pytest

from seawall.cdc._mapping import MapError, TableMap, parse_map, parse_maps


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("users=users", TableMap(None, "users", "users", None)),
        ("sales.orders=orders:order_no", TableMap("sales", "orders", "orders", "order_no")),
        (" users = people ", TableMap(None, "users", "people", None)),
        ("t=ns:with:colons", None),
    ],
)
def test_parse_map(text: str, expected: TableMap | None) -> None:
    if expected is None:
        with pytest.raises(MapError, match="is not a column name"):
            parse_map(text)
    else:
        assert parse_map(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("users", "expected TABLE=NAMESPACE"),
        ("=users", "expected TABLE=NAMESPACE"),
        ("users=", "expected TABLE=NAMESPACE"),
        ("a.b.c=x", "is not a table name"),
        ("1users=x", "is not a table name"),
        ("users=:id", "namespace is empty"),
        ("users=x:", "is not a column name"),
    ],
)
def test_bad_maps_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(MapError, match=message):
        parse_map(text)


def test_qualified_names_use_the_default_schema() -> None:
    assert parse_map("users=u").qualified("public") == "public.users"
    assert parse_map("s.users=u").qualified("public") == "s.users"


def test_a_table_may_feed_several_namespaces_but_each_once() -> None:
    assert len(parse_maps(["users=a", "public.users=b"], "public")) == 2
    with pytest.raises(MapError, match="to namespace 'a' twice"):
        parse_maps(["users=a", "public.users=a:email"], "public")
    assert len(parse_maps(["users=a", "other.users=a"], "public")) == 2
    with pytest.raises(MapError, match="no --map"):
        parse_maps([])
