"""`seawall hotkeys URL`: the most-read keys (LFU counters, HOTKEYS, or seawall.Cache)."""

from __future__ import annotations

import click

from seawall.cli._ops import URL_HELP, interrupted, json_option, scan_options, url_argument

_TITLES = {
    "lfu": "LFU counters (OBJECT FREQ over a scan)",
    "hotkeys": "the HOTKEYS command (CPU time per key)",
    "published": "reports of seawall.Cache processes (reads/s)",
}


@click.command(
    help="The hottest keys, by the best method the server allows: with an LFU eviction "
    "policy, OBJECT FREQ over a scan; on servers with the HOTKEYS command (Redis 8.6+), "
    "HOTKEYS tracking for --seconds; otherwise what seawall.Cache processes published. The "
    "method is named in the title and in each JSON entry. " + URL_HELP,
)
@url_argument
@click.option("--top", type=click.IntRange(1, 100_000), default=20, show_default=True)
@click.option(
    "--seconds",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="how long HOTKEYS tracks (the other methods read what is there now)",
)
@click.option(
    "--method",
    type=click.Choice(["auto", "lfu", "hotkeys", "published"]),
    default="auto",
    show_default=True,
)
@scan_options
@json_option
def command(
    url: str,
    top: int,
    seconds: float,
    method: str,
    pattern: str | None,
    type_: str | None,
    max_ops: float | None,
    count: int,
    cursor: str | None,
    as_json: bool,
) -> int:
    from rich.table import Column, Table

    from seawall.ops import hotkeys as hk
    from seawall.ops._connect import OpsError, connect, redact
    from seawall.ops._output import emit_json, progress_bar, stdout_console
    from seawall.ops._rate import Limiter
    from seawall.ops._scan import Scan

    with connect(url) as target:
        policy, has_command, published = hk.probe(target)
        chosen = hk.choose_method(policy, has_command, published) if method == "auto" else method
        if chosen is None:
            raise hk.no_method_error(policy)
        if chosen == "lfu" and "lfu" not in policy:
            raise OpsError(
                f"--method lfu needs an LFU eviction policy; {redact(url)} has {policy}: "
                "CONFIG SET maxmemory-policy allkeys-lfu"
            )
        stopped, resume = False, None
        if chosen == "lfu":
            scan = Scan(
                target.nodes, cluster=target.cluster, pattern=pattern, type_=type_,
                count=count, limiter=Limiter(max_ops), cursor=cursor,
            )  # fmt: skip
            with progress_bar("hotkeys", scan.progress.total) as update:
                found, stopped = hk.by_lfu(scan, top, update)
            resume = scan.resume_token() if stopped else None
            if not found and (pattern or type_) and not stopped:
                raise OpsError(f"no key matches {scan.describe()} on {redact(url)}")
        elif chosen == "hotkeys":
            found, stopped = hk.by_command(target.masters, top, seconds)
        else:
            found = hk.by_published(target, top)
        if as_json:
            emit_json([item.as_json() for item in found])
        else:
            figure = hk.FIGURES[chosen]
            table = Table(
                "#", Column("key", overflow="fold"), figure,
                *(["processes"] if chosen == "published" else ["node"]),
                title=f"seawall hotkeys {redact(url)}: method {chosen}, {_TITLES[chosen]}",
                title_justify="left",
                min_width=len(f"seawall hotkeys {redact(url)}: method {chosen}, {_TITLES[chosen]}"),
            )  # fmt: skip
            for rank, item in enumerate(found, 1):
                last = str(item.sources) if chosen == "published" else str(item.node or "")
                table.add_row(str(rank), item.key, f"{item.frequency:,}", last)
            stdout_console().print(table)
        if stopped:
            return interrupted(resume, redact(url), "hotkeys")
    return 0
