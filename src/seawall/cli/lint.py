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


def _patterns(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def _per_file(values: tuple[str, ...]) -> dict[str, list[str]]:
    """`--per-file-ignores "tests/**:SW002,SW008"` (repeatable)."""
    found: dict[str, list[str]] = {}
    for value in values:
        pattern, colon, codes = value.rpartition(":")
        if not colon or not pattern.strip():
            raise click.BadParameter(
                f"{value!r}: expected PATTERN:CODES, e.g. 'tests/**:SW002,SW008'",
                param_hint="--per-file-ignores",
            )
        found.setdefault(pattern.strip(), []).extend(sorted(_codes(codes)))
    return found


def _check_codes(codes: set[str], known: set[str], where: str) -> None:
    unknown = sorted(codes - known)
    if unknown:
        raise click.BadParameter(
            f"unknown rule code {', '.join(unknown)} (known: {', '.join(sorted(known))})",
            param_hint=where,
        )


@click.command(
    help="Checks Python code that uses redis-py (sync or asyncio) for commands and recipes "
    "that hurt in production: KEYS, FLUSHALL, SETNX+EXPIRE and GETSET locks, DEL releases, "
    "one command per loop iteration, whole-collection reads, clients without timeouts, "
    "locks without expiry, KEYS in Lua scripts, sync clients in async code, clients built "
    "per request. "
    "Directories are walked for *.py files, leaving out the default exclusions, --exclude "
    "patterns and what .gitignore ignores. Options may also sit in pyproject.toml under "
    "[tool.seawall.lint] (select, ignore, exclude, extend-exclude, per-file-ignores, "
    "respect-gitignore). A file that is not Python is reported as an SW000 finding. "
    "Exit status: 0 clean, 1 findings, 2 a usage error. Silence a line with "
    "`# noqa: SW001`.",
)
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=True))
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "sarif", "github"]),
    default="text",
    show_default=True,
    help="text: path:line:col: CODE message; json: a list of objects; sarif: SARIF 2.1.0 "
    "for code scanning; github: GitHub Actions annotations",
)
@click.option(
    "--explain",
    metavar="CODE",
    callback=_explain,
    expose_value=False,
    is_eager=True,
    help="print why a rule exists and how to fix what it finds, then exit",
)
@click.option(
    "--select",
    default=None,
    help="only these rule codes, comma-separated (default: every rule but SW007)",
)
@click.option(
    "--extend-select",
    default=None,
    help="these rule codes besides the default ones (SW007 is asked for so), comma-separated",
)
@click.option(
    "--ignore", default=None, help="skip these rule codes (added to the config's), comma-separated"
)
@click.option(
    "--exclude",
    default=None,
    metavar="PATTERNS",
    help="glob patterns of files and directories to leave out, comma-separated; replaces the "
    "defaults (.venv, venv, .git, __pycache__, caches, node_modules, site-packages)",
)
@click.option(
    "--extend-exclude",
    default=None,
    metavar="PATTERNS",
    help="glob patterns to leave out in addition to the defaults, comma-separated",
)
@click.option(
    "--per-file-ignores",
    "per_file_ignores",
    multiple=True,
    metavar="PATTERN:CODES",
    help="skip rule codes in matching files, e.g. 'tests/**:SW002,SW008' (repeatable)",
)
@click.option(
    "--no-respect-gitignore",
    "no_gitignore",
    is_flag=True,
    help="walk into what .gitignore files ignore",
)
@click.option(
    "--config",
    "config_path",
    default=None,
    type=click.Path(exists=True, dir_okay=False),
    help="the pyproject.toml to read [tool.seawall.lint] from (default: the nearest one)",
)
@click.option("--isolated", is_flag=True, help="read no pyproject.toml")
def command(
    paths: tuple[str, ...],
    output_format: str,
    select: str | None,
    extend_select: str | None,
    ignore: str | None,
    exclude: str | None,
    extend_exclude: str | None,
    per_file_ignores: tuple[str, ...],
    no_gitignore: bool,
    config_path: str | None,
    isolated: bool,
) -> int:
    from seawall.lint import (
        BY_CODE,
        FORMATS,
        PARSE_ERROR,
        RULES,
        Config,
        ConfigError,
        Selection,
        find_pyproject,
        lint_paths,
        load_config,
    )

    try:
        found = None if isolated else (config_path or find_pyproject(paths[0]))
        config = load_config(found) if found else Config()
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc
    where = config.source or "pyproject.toml"
    rule_codes = set(BY_CODE)
    _check_codes(set(config.select or ()), rule_codes, f"{where} select")
    _check_codes(set(config.extend_select), rule_codes, f"{where} extend-select")
    _check_codes(set(config.ignore), rule_codes | {PARSE_ERROR}, f"{where} ignore")
    for codes in config.per_file_ignores.values():
        _check_codes(set(codes), rule_codes | {PARSE_ERROR}, f"{where} per-file-ignores")
    chosen = _codes(select) if select is not None else set(config.select or ())
    skipped = _codes(ignore) | set(config.ignore)
    _check_codes(_codes(select) | _codes(ignore), rule_codes | {PARSE_ERROR}, "--select/--ignore")
    _check_codes(_codes(select), rule_codes, "--select")
    _check_codes(_codes(extend_select), rule_codes, "--extend-select")
    if not chosen:  # the default rules, and those asked for by name
        chosen = {r.code for r in RULES if r.default}
    chosen |= _codes(extend_select) | set(config.extend_select)
    extra = _per_file(per_file_ignores)
    for codes in extra.values():
        _check_codes(set(codes), rule_codes | {PARSE_ERROR}, "--per-file-ignores")
    rules = [r for r in RULES if r.code in chosen and r.code not in skipped]
    selection = Selection(
        exclude=_patterns(exclude) if exclude is not None else config.exclude,
        extend_exclude=[*config.extend_exclude, *_patterns(extend_exclude)],
        respect_gitignore=config.respect_gitignore and not no_gitignore,
        root=config.root,
    )
    ignores = dict(config.per_file_ignores)
    for pattern, codes in extra.items():
        ignores[pattern] = [*ignores.get(pattern, []), *codes]
    report = lint_paths(paths, rules, selection=selection, per_file_ignores=ignores)
    findings = [f for f in report.findings if f.rule not in skipped]
    sys.stdout.write(FORMATS[output_format](findings))
    sys.stdout.flush()
    if report.files == 0:
        click.echo(f"seawall lint: no *.py files under {', '.join(paths)}", err=True)
    return 1 if findings else 0
