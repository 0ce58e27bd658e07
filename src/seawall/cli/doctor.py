"""`seawall doctor URL`: audit a live server against the guidelines; exit 1 on errors."""

from __future__ import annotations

import click

from seawall.cli._ops import URL_HELP, json_option

_COLOURS = {"error": "red", "warning": "yellow", "info": "blue"}


@click.command(
    help="Audits a live server: maxmemory and eviction policy, dangerous commands not "
    "renamed or denied, lazy freeing, big keys, keys without TTL by prefix, long key names, "
    "O(N) commands in the slow log, fragmentation, persistence, replicas, client buffers, "
    "Cluster slot balance, and the server's MEMORY DOCTOR and LATENCY DOCTOR advice. Each "
    "finding names its rule, the guideline and the fix. Exit status 1 when any finding is "
    "an error (for CI). `--explain CODE` needs no URL. " + URL_HELP,
)
@click.argument("url", metavar="URL", required=False)
@click.option("--no-keys", is_flag=True, help="skip the key rules (no scan of the keys)")
@click.option(
    "--max-ops",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="at most N ops/s on each server while scanning the keys",
)
@click.option("--explain", metavar="CODE", default=None, help="print a rule's rationale and exit")
@json_option
def command(
    url: str | None, no_keys: bool, max_ops: float | None, explain: str | None, as_json: bool
) -> int:
    from rich.table import Column, Table
    from rich.text import Text

    from seawall.ops._connect import connect, redact
    from seawall.ops._output import counted, emit_json, progress_bar, stdout_console
    from seawall.ops.doctor import BY_CODE, collect, diagnose

    if explain is not None:
        rule = BY_CODE.get(explain.strip().upper())
        if rule is None:
            raise click.BadParameter(
                f"unknown rule {explain} (known: {', '.join(BY_CODE)})", param_hint="--explain"
            )
        click.echo(f"{rule.code} {rule.name} ({rule.guideline})\n\n{rule.rationale}")
        return 0
    if url is None:
        raise click.UsageError("give the URL of the server to audit (or --explain CODE)")
    with connect(url) as target:
        total = sum(int(m.client.dbsize()) for m in target.masters) if not no_keys else 0
        with progress_bar("doctor", total) as update:
            snapshot = collect(target, keys=not no_keys, max_ops=max_ops, on_batch=update)
        findings = diagnose(snapshot)
    if as_json:
        emit_json({"findings": [f.as_json() for f in findings]})
    else:
        table = Table(
            "rule", "severity", Column("finding", overflow="fold"), "fix",
            title=f"seawall doctor {redact(url)}: {counted(len(findings), 'finding')}",
            title_justify="left",
            min_width=len(f"seawall doctor {redact(url)}: {counted(len(findings), 'finding')}"),
        )  # fmt: skip
        for f in findings:
            table.add_row(
                f"{f.rule}\n{f.name}", Text(f.severity, style=_COLOURS[f.severity]),
                f.message, f.fix,
            )  # fmt: skip
        stdout_console().print(table)
    return 1 if any(f.severity == "error" for f in findings) else 0
