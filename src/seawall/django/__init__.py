"""Django integration: a cache backend and a session engine on seawall (docs/django.md).

    CACHES = {"default": {"BACKEND": "seawall.django.RedisCache", "LOCATION": "redis://..."}}
    SESSION_ENGINE = "seawall.django.sessions"
    INSTALLED_APPS = [..., "seawall.django"]      # the system checks (manage.py check)

What it keeps right, beyond Django's own RedisCache:
- get_or_set(key, callable) runs the callable once for every caller that misses the key
  together, in all processes (a load lease in Redis, the waiters woken by the write-back,
  never polled); so do cache_page and template fragments that go through it.
- a delete while such a load runs voids it: the load cannot write back a value it read
  before the delete.
- incr()/decr() are one atomic step: a key expiring between the check and the add never
  comes back without an expiry.
- clear() deletes this cache's keys, not the whole database (sessions and other data
  sharing the server survive).
- the a* methods talk to Redis on the event loop (redis.asyncio), not in a thread.
- sessions are one hash per session written as deltas: parallel requests of one user
  that change different keys keep both changes; cycle_key() (login) moves the session
  to a new id and deletes the old one in the same step.

Entries are stored as Django's RedisCache stores them (ints as digits, the rest pickled),
so switching between the two backends keeps the cache warm.

Inside: `_async/` (hand-written) and `_sync/` (generated) hold the Redis side of the
cache and the sessions; `cache.py` (the backend and its sync methods, with its a* methods
in `_async_methods.py`, its OPTIONS read by `_options.py`, its L1 and breaker in
`_extras.py` and `_local.py`), `middleware.py`, `sessions.py`, `checks.py` and `apps.py`
are Django's side; `_keys.py` and `_serializer.py` the pure cores; `django_*.lua` the
scripts.
"""

from __future__ import annotations

try:
    import django  # noqa: F401
except ImportError:  # pragma: no cover - the message is the point
    raise ImportError("seawall.django needs Django: pip install 'seawall[django]'") from None

from seawall.django.cache import NotAnInteger, RedisCache
from seawall.django.middleware import cache_page

__all__ = ["NotAnInteger", "RedisCache", "cache_page"]
