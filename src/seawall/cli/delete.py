"""`seawall delete URL --pattern P`: delete matching keys without blocking the server."""

from __future__ import annotations

import click

from seawall.cli._ops import URL_HELP, interrupted, json_option, no_terminal, url_argument


@click.command(
    help="Deletes every key matching --pattern: SCAN + UNLINK in batches under --max-ops; "
    "where UNLINK is unavailable and lazy freeing is off, big collections are emptied a "
    "few hundred elements at a time first, so the server keeps answering other clients. "
    "Asks for confirmation on a terminal unless --yes. " + URL_HELP,
)
@url_argument
@click.option("--pattern", required=True, help="glob of the keys to delete (SCAN MATCH)")
@click.option(
    "--type",
    "type_",
    type=click.Choice(["string", "list", "set", "zset", "hash", "stream"]),
    default=None,
    help="only keys of this type",
)
@click.option("--yes", is_flag=True, help="do not ask for confirmation")
@click.option("--dry-run", is_flag=True, help="count (and show a few of) the keys, delete none")
@click.option(
    "--incremental",
    is_flag=True,
    help="empty big collections step by step even where UNLINK would free them lazily",
)
@click.option("--max-ops", type=click.FloatRange(min=0, min_open=True), default=None,
              help="at most N ops/s on each server (one per key deleted)")  # fmt: skip
@click.option("--count", type=click.IntRange(10, 10_000), default=500, show_default=True,
              help="keys per SCAN batch")  # fmt: skip
@click.option("--cursor", default=None, help="resume an interrupted delete from its cursor")
@json_option
def command(
    url: str,
    pattern: str,
    type_: str | None,
    yes: bool,
    dry_run: bool,
    incremental: bool,
    max_ops: float | None,
    count: int,
    cursor: str | None,
    as_json: bool,
) -> int:
    from seawall.ops._connect import OpsError, connect, redact
    from seawall.ops._output import counted, emit_json, progress_bar, stdout_console
    from seawall.ops._rate import Limiter
    from seawall.ops._scan import Scan
    from seawall.ops.delete import delete, summary

    if not pattern.strip():
        raise click.BadParameter("must not be empty", param_hint="--pattern")
    where = redact(url)
    if not dry_run and not yes:
        if no_terminal():
            raise OpsError(
                f"refusing to delete keys matching {pattern!r} without confirmation: stdin "
                "is not a terminal; pass --yes (or --dry-run to count them first)"
            )
        if not click.confirm(f"Delete every key matching {pattern!r} on {where}?"):
            click.echo("seawall delete: nothing deleted", err=True)
            return 1
    with connect(url) as target:
        scan = Scan(
            target.masters, cluster=target.cluster, pattern=pattern, type_=type_,
            count=count, limiter=Limiter(max_ops), cursor=cursor,
        )  # fmt: skip
        with progress_bar("delete" if not dry_run else "dry run", scan.progress.total) as update:
            report = delete(scan, dry_run=dry_run, incremental=incremental, on_batch=update)
        # A script asked for JSON: no match is a summary with nothing matched, not an error.
        if report.matched == 0 and not report.interrupted and not as_json:
            raise OpsError(f"no key matches {scan.describe()} on {where}: nothing deleted")
        if as_json:
            emit_json(summary(report, pattern))
        else:
            console = stdout_console()
            if dry_run:
                verb = "matches" if report.matched == 1 else "match"
                console.print(
                    f"{counted(report.matched, 'key')} {verb} {pattern!r} on {where} "
                    "(dry run: none deleted)"
                )
                for key in report.sample:
                    console.print(f"  {key}", markup=False)
            else:
                deleted = counted(report.deleted, "key")
                console.print(f"deleted {deleted} matching {pattern!r} on {where}")
                if report.emptied:
                    console.print(
                        f"  {counted(len(report.emptied), 'big collection')} emptied step by "
                        "step first: " + ", ".join(report.emptied[:5]),
                        markup=False,
                    )
        if report.interrupted:
            return interrupted(report.cursor, where, "delete")
    return 0
