"""`seawall bigkeys URL`: the N keys that take the most memory, with per-type totals."""

from __future__ import annotations

from typing import Any

import click

from seawall.cli._ops import (
    URL_HELP,
    interrupted,
    json_option,
    replica_option,
    scan_options,
    url_argument,
)


def render(url: str, report: Any, top: int) -> Any:
    from rich.console import Group
    from rich.table import Column, Table

    from seawall.ops._output import counted, text_key
    from seawall.ops._sizes import human_bytes

    title = f"seawall bigkeys {url}: top {top} of {counted(report.scanned, 'key')} by memory"
    biggest = Table(
        "#", Column("key", overflow="fold"), "type", "memory", "length",
        Column("node", overflow="fold"),
        title=title, title_justify="left", min_width=len(title),
    )  # fmt: skip
    for rank, item in enumerate(report.top, 1):
        unit = "bytes" if item.type == "string" else "elements"
        length = "-" if item.length is None else f"{item.length:,} {unit}"
        biggest.add_row(
            str(rank), text_key(item.key), item.type, human_bytes(item.bytes), length, item.node
        )
    totals = Table(
        "type", "keys", "memory", "share", "p50", "p90", "p99", "max",
        title="per type (sizes: MEMORY USAGE)", title_justify="left",
    )  # fmt: skip
    whole = max(report.totals.all.bytes, 1)
    for kind, total in report.totals.rows():
        sizes = total.sizes
        totals.add_row(
            kind, f"{total.keys:,}", human_bytes(total.bytes), f"{100 * total.bytes / whole:.1f} %",
            human_bytes(sizes.percentile(50)), human_bytes(sizes.percentile(90)),
            human_bytes(sizes.percentile(99)), human_bytes(sizes.largest),
        )  # fmt: skip
    return Group(biggest, totals)


@click.command(
    help="Scans every key (SCAN, then one pipelined TYPE + MEMORY USAGE per key) and prints "
    "the N largest with type, memory and length, then totals and size percentiles per type. "
    "Memory stays bounded (a heap of N). Ctrl-C prints what was found and the cursor to "
    "resume from. " + URL_HELP,
)
@url_argument
@click.option("--top", type=click.IntRange(1, 100_000), default=20, show_default=True)
@click.option(
    "--samples",
    type=click.IntRange(0, 10_000),
    default=5,
    show_default=True,
    help="elements MEMORY USAGE samples per collection (0: all, exact but O(N))",
)
@scan_options
@json_option
@replica_option
def command(
    url: str,
    top: int,
    samples: int,
    pattern: str | None,
    type_: str | None,
    max_ops: float | None,
    count: int,
    cursor: str | None,
    as_json: bool,
    replica: bool,
) -> int:
    from seawall.ops._connect import OpsError, connect, redact
    from seawall.ops._output import emit_json, progress_bar, stdout_console
    from seawall.ops._rate import Limiter
    from seawall.ops._scan import Scan
    from seawall.ops.bigkeys import measure

    with connect(url, replica=replica) as target:
        scan = Scan(
            target.nodes, cluster=target.cluster, pattern=pattern, type_=type_, count=count,
            limiter=Limiter(max_ops), cursor=cursor,
        )  # fmt: skip
        with progress_bar("bigkeys", scan.progress.total) as update:
            report = measure(scan, top=top, samples=samples, on_batch=update)
        # A script asked for JSON: no match is an empty list, not an error.
        if not report.scanned and not report.interrupted and (pattern or type_) and not as_json:
            raise OpsError(f"no key matches {scan.describe()} on {redact(url)}")
        if as_json:
            emit_json([item.as_json() for item in report.top])
        else:
            stdout_console().print(render(redact(url), report, top))
        if report.interrupted:
            return interrupted(report.cursor, redact(url), "bigkeys")
    return 0
