"""`seawall lint PATH...`: redis-py misuse, reported the way ruff and flake8 report."""

from __future__ import annotations

import sys

import click


def _codes(value: str | None) -> set[str]:
    return {c.strip().upper() for c in (value or "").split(",") if c.strip()}


def _explain(ctx: click.Context, _param: click.Parameter, code: str | None) -> None:
    """`--explain SW003`: the rule's rationale and fix, as ruff's `ruff rule` prints them."""
    if code is None or ctx.resilient_parsing:
        return
    from seawall.lint import BY_CODE

    rule = BY_CODE.get(code.strip().upper())
    if rule is None:
        raise click.BadParameter(
            f"unknown rule code {code} (known: {', '.join(BY_CODE)})", param_hint="--explain"
        )
    click.echo(f"{rule.code} {rule.name}\n\n{rule.rationale}")
    ctx.exit(0)


@click.command(
    help="Checks Python code that uses redis-py (sync or asyncio) for commands and recipes "
    "that hurt in production: KEYS, FLUSHALL, SETNX+EXPIRE and GETSET locks, DEL releases, "
    "one command per loop iteration, whole-collection reads, clients without timeouts. "
    "Directories are walked for *.py files. Exit status: 0 clean, 1 findings, 2 a usage "
    "error or a file that is not Python. Silence a line with `# noqa: SW001`.",
)
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=True))
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text: path:line:col: CODE message; json: a list of objects",
)
@click.option(
    "--explain",
    metavar="CODE",
    callback=_explain,
    expose_value=False,
    is_eager=True,
    help="print why a rule exists and how to fix what it finds, then exit",
)
@click.option("--select", default=None, help="only these rule codes, comma-separated")
@click.option("--ignore", default=None, help="skip these rule codes, comma-separated")
def command(
    paths: tuple[str, ...], output_format: str, select: str | None, ignore: str | None
) -> int:
    from seawall.lint import BY_CODE, FORMATS, RULES, lint_paths

    chosen, skipped = _codes(select), _codes(ignore)
    unknown = sorted((chosen | skipped) - set(BY_CODE))
    if unknown:
        raise click.BadParameter(
            f"unknown rule code {', '.join(unknown)} (known: {', '.join(BY_CODE)})",
            param_hint="--select/--ignore",
        )
    rules = [r for r in RULES if (not chosen or r.code in chosen) and r.code not in skipped]
    report = lint_paths(paths, rules)
    sys.stdout.write(FORMATS[output_format](report.findings))
    sys.stdout.flush()
    if report.files == 0:
        click.echo(f"seawall lint: no *.py files under {', '.join(paths)}", err=True)
    for error in report.errors:
        click.echo(f"seawall lint: {error}", err=True)
    if report.errors:
        return 2
    return 1 if report.findings else 0
