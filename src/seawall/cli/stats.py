"""`seawall stats URL`: hit rate, throughput, memory, evictions, top commands, lag."""

from __future__ import annotations

from typing import Any

import click

from seawall.cli._ops import URL_HELP, json_option, replica_option, url_argument


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


class _CtrlC:
    """Ctrl-C for a refresh loop, taken only between refreshes.

    A KeyboardInterrupt raised in the middle of a Redis call or of a write to the
    terminal can leave a connection or an output buffer half used, and the exit that
    follows may then hang (seen once: `--watch` into a pipe ignored Ctrl-C for 20 s).
    Here Ctrl-C during the pause ends the loop at once; during a refresh it ends the loop
    when that refresh is done; a second Ctrl-C interrupts whatever runs.
    """

    def __init__(self) -> None:
        self._pressed = False
        self._pausing = False
        self._previous: Any = None

    def __enter__(self) -> _CtrlC:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc: object) -> None:
        import signal

        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _on_sigint(self, signum: int, frame: object) -> None:
        if self._pausing or self._pressed:
            raise KeyboardInterrupt
        self._pressed = True

    def pause(self, seconds: float) -> bool:
        """Sleep between refreshes; False once Ctrl-C was pressed (before or during it)."""
        import time

        if self._pressed:
            return False
        self._pausing = True
        try:
            time.sleep(seconds)
        except KeyboardInterrupt:
            return False
        finally:
            self._pausing = False
        return not self._pressed


def render(url: str, figures: dict[str, Any]) -> Any:
    from rich.console import Group
    from rich.table import Table

    from seawall.ops._sizes import human_bytes

    title = f"seawall stats {url}"
    overview = Table("figure", "value", title=title, title_justify="left", min_width=len(title))
    lag = figures["max_replication_lag_bytes"]
    rows = [
        ("hit rate", _pct(figures["hit_rate"])),
        ("hits / misses", f"{figures['keyspace_hits']:,} / {figures['keyspace_misses']:,}"),
        ("ops/s", f"{figures['ops_per_sec']:,.0f}"),
        ("keys", f"{figures['keys']:,}"),
        ("memory used", human_bytes(figures["used_memory"])),
        ("memory peak", human_bytes(figures["used_memory_peak"])),
        ("maxmemory", human_bytes(figures["maxmemory"]) if figures["maxmemory"] else "no limit"),
        ("fragmentation", f"{figures['fragmentation_ratio']:.2f}"),
        ("evicted keys", f"{figures['evicted_keys']:,}"),
        ("expired keys", f"{figures['expired_keys']:,}"),
        ("clients", f"{figures['connected_clients']:,}"),
        ("replication lag", "-" if lag is None else f"{lag:,} bytes"),
    ]
    for name, value in rows:
        overview.add_row(name, value)
    commands = Table(
        "by calls", "calls", "by time", "ms", "µs/call",
        title="top commands (INFO commandstats)", title_justify="left",
    )  # fmt: skip
    by_calls, by_time = figures["top_commands_by_calls"], figures["top_commands_by_time"]
    for index in range(max(len(by_calls), len(by_time))):
        a = by_calls[index] if index < len(by_calls) else None
        b = by_time[index] if index < len(by_time) else None
        commands.add_row(
            a["command"] if a else "",
            f"{a['calls']:,}" if a else "",
            b["command"] if b else "",
            f"{b['usec'] / 1000:,.1f}" if b else "",
            f"{b['usec_per_call']:,.1f}" if b else "",
        )
    parts: list[Any] = [overview, commands]
    if len(figures["nodes"]) > 1:
        nodes = Table(
            "node", "role", "keys", "ops/s", "hit rate", "memory", "frag",
            title="per node", title_justify="left",
        )  # fmt: skip
        for n in figures["nodes"]:
            nodes.add_row(
                n["address"], n["role"], f"{n['keys']:,}", f"{n['ops_per_sec']:,.0f}",
                _pct(n["hit_rate"]), human_bytes(n["used_memory"]),
                f"{n['fragmentation_ratio']:.2f}",
            )  # fmt: skip
        parts.append(nodes)
    if figures["replication"]:
        lags = Table("replica", "master", "link", "lag bytes", "lag s", title="replication")
        for r in figures["replication"]:
            lags.add_row(
                r["replica"], r["master"], str(r["link"]),
                "-" if r["lag_bytes"] is None else f"{r['lag_bytes']:,}",
                str(r["lag_seconds"]),
            )  # fmt: skip
        parts.append(lags)
    return Group(*parts)


@click.command(
    help="Hit rate (keyspace_hits / (hits + misses)), ops/s, memory used and peak, "
    "fragmentation, evictions, expired keys, clients, top commands by calls and by time, "
    "replication lag. " + URL_HELP,
)
@url_argument
@json_option
@replica_option
@click.option(
    "--watch",
    type=click.FloatRange(min=0.1),
    default=None,
    metavar="S",
    help="refresh every S seconds in place until Ctrl-C (ops/s measured between refreshes)",
)
def command(url: str, as_json: bool, replica: bool, watch: float | None) -> int:
    from seawall.ops._connect import connect, redact
    from seawall.ops._output import emit_json, stdout_console
    from seawall.ops.stats import sample, summarize

    if watch is not None and as_json:
        raise click.UsageError("--watch refreshes a table; it cannot be combined with --json")
    with connect(url, replica=replica) as target:
        first = sample(target)
        if watch is None:
            figures = summarize(first)
            if as_json:
                emit_json(figures)
            else:
                stdout_console().print(render(redact(url), figures))
            return 0
        from rich.live import Live

        console = stdout_console()
        previous = first
        with _CtrlC() as ctrl_c:
            if not console.is_terminal:
                # Into a pipe or a log file: one table per refresh, one after the other.
                console.print(render(redact(url), summarize(first)))
                while ctrl_c.pause(watch):
                    current = sample(target)
                    console.print(render(redact(url), summarize(current, previous)))
                    previous = current
                return 0
            with Live(render(redact(url), summarize(first)), console=console) as live:
                while ctrl_c.pause(watch):
                    current = sample(target)
                    live.update(render(redact(url), summarize(current, previous)))
                    previous = current
        return 0
