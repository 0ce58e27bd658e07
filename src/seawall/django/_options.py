"""Reading a CACHES entry for seawall.django.RedisCache: LOCATION, the OPTIONS seawall
reads, the django-redis options refused with what to write instead, and the redis-py
client made from what is left."""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio.cluster
import redis.cluster
from django.core.exceptions import ImproperlyConfigured

# django-redis's OPTIONS and what to write here instead (None: nothing to write).
DJANGO_REDIS_OPTIONS = {
    "CLIENT_CLASS": None,
    "SERIALIZER": "serializer",
    "COMPRESSOR": None,
    "SOCKET_TIMEOUT": "socket_timeout",
    "SOCKET_CONNECT_TIMEOUT": "socket_connect_timeout",
    "PASSWORD": "password",
    "CONNECTION_POOL_KWARGS": "the pool's options themselves (max_connections, ...)",
    "CONNECTION_POOL_CLASS": None,
    "PARSER_CLASS": "parser_class",
    "REDIS_CLIENT_CLASS": None,
    "REDIS_CLIENT_KWARGS": "the client's options themselves",
    "IGNORE_EXCEPTIONS": None,
}

# OPTIONS seawall reads; every other option goes to redis-py's client (db, password,
# socket_timeout, max_connections, ssl_cert_reqs, ...).
OWN_OPTIONS = {
    "serializer",
    "lease",
    "wait_timeout",
    "cluster",
    "clear_prefix",
    "l1_size",
    "l1_ttl",
    "breaker",
    "stale_ttl",
}


def refuse_foreign(options: dict[str, Any]) -> None:
    """ImproperlyConfigured for an option of django-redis or of Django's culling
    backends, naming what to write instead."""
    for name in sorted(options):
        if name in DJANGO_REDIS_OPTIONS:
            instead = DJANGO_REDIS_OPTIONS[name]
            hint = f"write {instead!r} instead" if instead else "it has no equivalent here"
            raise ImproperlyConfigured(
                f"OPTIONS[{name!r}] is a django-redis option; seawall.django.RedisCache "
                f"does not read it: {hint} (docs/django.md, 'Moving from django-redis')"
            )
        if name in ("MAX_ENTRIES", "CULL_FREQUENCY"):
            raise ImproperlyConfigured(
                f"OPTIONS[{name!r}]: Redis bounds its memory itself (maxmemory and "
                "maxmemory-policy in the server's configuration); remove this option"
            )


def location_urls(server: str | list[str] | tuple[str, ...]) -> list[str]:
    """LOCATION as a list of URLs: one string may hold several, split by , or ;."""
    if isinstance(server, str):
        urls = [url.strip() for url in server.replace(";", ",").split(",") if url.strip()]
    else:
        urls = [str(url) for url in server]
    if not urls:
        raise ImproperlyConfigured(
            "seawall.django.RedisCache needs a LOCATION: a redis:// URL, or a list of "
            "URLs of Redis Cluster nodes"
        )
    return urls


def seconds(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ImproperlyConfigured(
            f"OPTIONS[{what!r}] must be a number of seconds > 0, got {value!r}"
        )
    return float(value)


def make_client(
    urls: list[str], cluster: bool, single: Any, cluster_class: Any, options: dict[str, Any]
) -> Any:
    """`single.from_url(urls[0])`, or for a Cluster `cluster_class.from_url` with the other
    URLs as startup nodes (sync or asyncio: the classes say which)."""
    if not cluster:
        return single.from_url(urls[0], **options)
    nodes_module = (
        redis.asyncio.cluster
        if cluster_class is redis.asyncio.cluster.RedisCluster
        else redis.cluster
    )
    nodes = []
    for url in urls[1:]:
        parsed = redis.connection.parse_url(url)  # type: ignore[no-untyped-call,unused-ignore]
        nodes.append(
            nodes_module.ClusterNode(parsed.get("host", "localhost"), parsed.get("port", 6379))
        )
    extra = {"startup_nodes": nodes} if nodes else {}
    return cluster_class.from_url(urls[0], **extra, **options)
