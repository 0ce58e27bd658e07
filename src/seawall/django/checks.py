"""System checks of seawall.django, run by `manage.py check` once "seawall.django" is in
INSTALLED_APPS (see apps.py). Each says what is wrong and what to change.

- E001: SESSION_ENGINE is seawall's, but SESSION_CACHE_ALIAS names no seawall cache.
- W001: the Redis holding the sessions may evict them (maxmemory-policy allkeys-* or
  volatile-*; sessions carry a TTL, so volatile-* takes them too): under memory pressure
  users are logged out at random.
- W002: that Redis could not be asked (down, or CONFIG refused by a managed service).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Warning, register

from seawall.shared._eviction import describe, evicts

ENGINE = "seawall.django.sessions"
BACKEND = "seawall.django.RedisCache"
# A check must not hang `manage.py check` on an unreachable server.
CHECK_TIMEOUT = 1.0


def _session_cache() -> tuple[str, dict[str, Any]]:
    alias = getattr(settings, "SESSION_CACHE_ALIAS", "default")
    return alias, dict(getattr(settings, "CACHES", {}).get(alias) or {})


@register("caches", "sessions")
def check_session_cache(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    if getattr(settings, "SESSION_ENGINE", "") != ENGINE:
        return []
    alias, config = _session_cache()
    if config.get("BACKEND") == BACKEND:
        return []
    return [
        Error(
            f"SESSION_ENGINE is {ENGINE!r}, which keeps sessions in the Redis of cache "
            f"{alias!r} (SESSION_CACHE_ALIAS), but that cache's BACKEND is "
            f"{config.get('BACKEND')!r}.",
            hint=f"Give CACHES[{alias!r}] the BACKEND {BACKEND!r}, or point "
            "SESSION_CACHE_ALIAS at a cache that has it.",
            id="seawall.django.E001",
        )
    ]


@register("caches", "sessions")
def check_session_eviction(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    if getattr(settings, "SESSION_ENGINE", "") != ENGINE:
        return []
    alias, config = _session_cache()
    if config.get("BACKEND") != BACKEND:
        return []  # E001 says it
    from django.core.cache import caches

    client = caches[alias].checking_client(CHECK_TIMEOUT)
    try:
        policies = _policies(client)
    except Exception as exc:
        return [
            Warning(
                f"Could not read maxmemory-policy of the Redis holding the sessions (cache "
                f"{alias!r}): {exc!r}.",
                hint="Check that it is up; on a managed service that refuses CONFIG, make "
                "sure its eviction policy is noeviction.",
                id="seawall.django.W002",
            )
        ]
    finally:
        client.close()
    return [
        Warning(
            f"The Redis holding the sessions ({server}, cache {alias!r}) runs "
            f"maxmemory-policy {policy}: when it reaches maxmemory it evicts sessions, "
            "logging their users out.",
            hint="Set maxmemory-policy noeviction on it, or keep the sessions on a Redis of "
            "their own (SESSION_CACHE_ALIAS) with noeviction and the cache on one with "
            "allkeys-lru.",
            id="seawall.django.W001",
        )
        for server, policy in policies
        if evicts(policy)
    ]


def _policies(client: Any) -> list[tuple[str, str]]:
    import redis.cluster

    def policy(reply: Any) -> str:
        value = dict(reply).get("maxmemory-policy", dict(reply).get(b"maxmemory-policy"))
        return value.decode() if isinstance(value, bytes) else str(value)

    if isinstance(client, redis.cluster.RedisCluster):
        return [
            (node.name, policy(client.config_get("maxmemory-policy", target_nodes=node)))
            for node in client.get_primaries()  # type: ignore[no-untyped-call,unused-ignore]
        ]
    return [(describe(client), policy(client.config_get("maxmemory-policy")))]
