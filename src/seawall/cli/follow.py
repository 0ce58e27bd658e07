"""`seawall follow SOURCE_URL --redis URL --map TABLE=NAMESPACE[:COLUMN]`: invalidate the
cache from the database's own change log until Ctrl-C or SIGTERM."""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from types import FrameType

import click

_HELP = """Follows a database's change log and invalidates the seawall.Cache entry of every
inserted, updated or deleted row: in Redis and in every process's memory, exactly as
cache.delete(key) does. The key is the row's primary key (or --map's COLUMN) as text, so
cache.get_or_load(42, ...) and the row with id 42 are one entry. The position is kept in
Redis after the invalidations before it; a restarted follower loses nothing. Run two for
fail-over: one leads, the other takes over within --ttl seconds.

\b
PostgreSQL 10+ (pip install 'seawall[cdc-postgresql]'), once in postgresql.conf, then
restart PostgreSQL:
  wal_level = logical
  max_replication_slots = 10
  max_wal_senders = 10
\b
and as a superuser (the follower creates the slot itself; a publication may name only
tables its creator owns, so their owner creates it, named seawall_<dbname>):
  CREATE ROLE seawall WITH LOGIN REPLICATION PASSWORD 'secret';
  GRANT SELECT ON public.users TO seawall;
  CREATE PUBLICATION seawall_shop FOR TABLE public.users;   -- as the table's owner
\b
  seawall follow 'postgresql://seawall:secret@db:5432/shop' \\
      --redis redis://cache:6379/0 --map users=users

\b
MariaDB 10.5+ / MySQL 8.0+ (pip install 'seawall[cdc-mysql]'), in my.cnf [mysqld],
then restart the server:
  server_id = 1
  log_bin = mariadb-bin
  binlog_format = ROW
  binlog_row_image = FULL
  binlog_row_metadata = FULL
  binlog_expire_logs_seconds = 604800    # the longest a follower may stay down
\b
and as an administrator (MySQL: REPLICATION CLIENT instead of BINLOG MONITOR):
  CREATE USER 'seawall'@'%' IDENTIFIED BY 'secret';
  GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'seawall'@'%';
  GRANT SELECT ON shop.* TO 'seawall'@'%';
\b
  seawall follow 'mysql://seawall:secret@db:3306/shop' \\
      --redis redis://cache:6379/0 --map users=users

\b
SOURCE_URL:
  postgresql://USER:PW@HOST:PORT/DB[?slot=NAME&publication=NAME]
  mysql://USER:PW@HOST:PORT/DB[?server_id=N&heartbeat=SECONDS]  (or mariadb://)
A bare --map table is in the public schema (PostgreSQL) or in DB (MariaDB/MySQL).
Status lines go to the log every --status-interval seconds (to stdout as JSON with
--json). See docs/cdc.md."""


@click.command(help=_HELP)
@click.argument("source_url")
@click.option("--redis", "redis_url", required=True, help="Redis URL the caches live in")
@click.option(
    "--map",
    "maps",
    multiple=True,
    required=True,
    metavar="TABLE=NAMESPACE[:COLUMN]",
    help="a table and the cache namespace of its rows (repeat for more tables)",
)
@click.option(
    "--ttl",
    type=click.FloatRange(min=1.0),
    default=10.0,
    show_default=True,
    help="election lease: a standby takes over this long after the leader dies",
)
@click.option(
    "--status-interval",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="seconds between status lines",
)
@click.option(
    "--on-gap",
    type=click.Choice(["clear", "stop"]),
    default="clear",
    show_default=True,
    help="when the log no longer goes back to the checkpoint (a purged binlog, a dropped "
    "slot, a restored server): clear the mapped namespaces and go on, or stop",
)
@click.option("--json", "as_json", is_flag=True, help="status lines to stdout as JSON")
@click.option("-v", "--verbose", is_flag=True, help="DEBUG logging")
def command(
    source_url: str,
    redis_url: str,
    maps: tuple[str, ...],
    ttl: float,
    status_interval: float,
    on_gap: str,
    as_json: bool,
    verbose: bool,
) -> int:
    import redis

    from seawall.cdc import Follower, FollowerStatus

    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("seawall.cdc").setLevel(logging.DEBUG if verbose else logging.INFO)

    def print_status(status: FollowerStatus) -> None:
        print(json.dumps(status.as_dict()), flush=True)

    try:
        client = redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=5)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--redis") from None
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        raise click.ClickException(f"cannot reach Redis at {redis_url}: {exc}") from None
    follower = Follower(
        source_url,
        client,
        list(maps),
        ttl=ttl,
        status_interval=status_interval,
        on_status=print_status if as_json else None,
        on_gap="stop" if on_gap == "stop" else "clear",
    )

    interrupted = False

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        # Stopping ends the follower's wait at once; a KeyboardInterrupt would be raised
        # only once a blocking read of the stream returns (up to the status interval).
        nonlocal interrupted
        interrupted = interrupted or signum == signal.SIGINT
        follower.stop()

    main = threading.current_thread() is threading.main_thread()
    if main:
        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        follower.run()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        follower.stop()
        if main:
            for number, handler in previous.items():
                signal.signal(number, handler)
        client.close()
    if interrupted:
        print("interrupted", file=sys.stderr)
        return 130  # as a shell reports SIGINT, like the other commands
    return 0
