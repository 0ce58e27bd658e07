"""`seawall slot KEY...`: the Cluster hash slot of each key, computed locally."""

from __future__ import annotations

import click

from seawall.cli._ops import json_option


@click.command(
    help="Prints the Redis Cluster hash slot of each KEY (CRC16 of its hash tag, the part "
    "in {braces}, or of the whole key) and the tag used. No server is needed.",
)
@click.argument("keys", nargs=-1, required=True)
@json_option
def command(keys: tuple[str, ...], as_json: bool) -> int:
    from rich.table import Column, Table

    from seawall.ops._output import emit_json, stdout_console
    from seawall.ops.slots import hash_tag, key_slot

    rows = []
    for key in keys:
        tag = hash_tag(key.encode())
        rows.append(
            {
                "key": key,
                "slot": key_slot(key),
                "hash_tag": None if tag is None else tag.decode("utf-8", "backslashreplace"),
            }
        )
    if as_json:
        emit_json(rows)
        return 0
    # A key is folded onto more lines in a narrow terminal, never cut short with "...".
    table = Table(Column("key", overflow="fold"), "slot", "hash tag", title="Cluster hash slots")
    for row in rows:
        table.add_row(str(row["key"]), str(row["slot"]), str(row["hash_tag"] or "(whole key)"))
    stdout_console().print(table)
    return 0
