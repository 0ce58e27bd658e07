"""INFO text as data: pure parsing, the same for every redis and valkey version.

    # Server                      (section headers are skipped: field names are unique)
    redis_version:7.0.15
    mem_fragmentation_ratio:1.23
    db0:keys=10,expires=2,avg_ttl=0
    cmdstat_get:calls=5,usec=12,usec_per_call=2.40,rejected_calls=0,failed_calls=0
    slave0:ip=127.0.0.1,port=6380,state=online,offset=42,lag=0

A plain value becomes an int or a float when it reads as one, else stays text; a value made
of `name=value` pairs (db0, cmdstat_*, slave0, errorstat_*) becomes a dict.
"""

from __future__ import annotations

from typing import Any

__all__ = ["number", "parse_info", "parse_value"]


def parse_value(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def parse_info(raw: bytes | str) -> dict[str, Any]:
    """Every `name:value` line of an INFO reply, in one flat dict."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    fields: dict[str, Any] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition(":")
        if not sep:
            continue
        if "=" in value and not value.startswith("=") and _is_pairs(value):
            fields[name] = {
                key: parse_value(item)
                for key, _, item in (pair.partition("=") for pair in value.split(","))
            }
        else:
            fields[name] = parse_value(value)
    return fields


def _is_pairs(value: str) -> bool:
    return all("=" in pair for pair in value.split(","))


def number(fields: dict[str, Any], name: str, default: float = 0.0) -> float:
    """A numeric field, `default` when absent or not a number."""
    value = fields.get(name)
    return float(value) if isinstance(value, int | float) else default
