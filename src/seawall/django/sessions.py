"""SESSION_ENGINE = "seawall.django.sessions": Django sessions in seawall.sessions' store.

    CACHES = {"default": {"BACKEND": "seawall.django.RedisCache", "LOCATION": "redis://..."}}
    SESSION_ENGINE = "seawall.django.sessions"
    # optional: SESSION_CACHE_ALIAS (the seawall.django.RedisCache whose Redis holds them),
    # SEAWALL_SESSION_PREFIX ("seawall:session"), SEAWALL_SESSION_MAX_SIZE (bytes, 1 MiB)

Each session is one Redis hash, one field per session key, as seawall.sessions keeps
them. A save writes the keys this request changed and removes the keys it deleted, never
the whole session: two requests of one user running in parallel (two tabs, an XHR beside
a page) that change different keys both keep their change, where Django's cache and
database engines write the whole session back and the last response wins. A session
deleted meanwhile (logout in another tab) is not brought back: save() raises UpdateError,
and Django's middleware answers SessionInterrupted.

cycle_key() (Django calls it at login) moves the data to a new id and deletes the old id
in one script: a fixated or stolen id is dead the moment the user logs in.

Ids are seawall.sessions' ("<tag>.<secret>", 256 random bits); Redis holds a digest of
the id, never the id itself, so a key name seen in MONITOR, a slow log or a backup is not
a working cookie.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.contrib.sessions.backends.base import SessionBase, UpdateError
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured

from seawall.django._async.sessions import AsyncSessionRecords
from seawall.django._sync.sessions import SessionRecords
from seawall.django.cache import RedisCache
from seawall.sessions import _ids
from seawall.sessions._options import DEFAULT_PREFIX

DEFAULT_MAX_SIZE = 1024 * 1024

_security = logging.getLogger("django.security.SuspiciousSession")


def _cache() -> RedisCache:
    alias = getattr(settings, "SESSION_CACHE_ALIAS", "default")
    cache = caches[alias]
    if not isinstance(cache, RedisCache):
        raise ImproperlyConfigured(
            f"SESSION_ENGINE 'seawall.django.sessions' keeps sessions in the Redis of cache "
            f"{alias!r} (SESSION_CACHE_ALIAS), which must be a seawall.django.RedisCache; it "
            f"is a {type(cache).__module__}.{type(cache).__qualname__}. Add a cache with "
            f"BACKEND 'seawall.django.RedisCache' and point SESSION_CACHE_ALIAS at it"
        )
    return cache


def _options() -> tuple[str, int]:
    prefix = getattr(settings, "SEAWALL_SESSION_PREFIX", DEFAULT_PREFIX)
    max_size = getattr(settings, "SEAWALL_SESSION_MAX_SIZE", DEFAULT_MAX_SIZE)
    return prefix, max_size


class SessionStore(SessionBase):
    """Django's SessionBase on seawall.sessions' store (see the module's docstring)."""

    _session_key: str | None  # SessionBase's property: None for no (valid) id

    def __init__(self, session_key: str | None = None) -> None:
        super().__init__(session_key)
        # What Redis held for this id when it was loaded or last written, per key
        # (serialized): a save sends only what differs. None: nothing stored yet.
        self._stored: dict[str, bytes] | None = None

    def _records(self) -> SessionRecords:
        return SessionRecords(_cache().client(), *_options())

    def _arecords(self) -> AsyncSessionRecords:
        return AsyncSessionRecords(_cache().async_client(), *_options())

    def _get_new_session_key(self) -> str:
        # 256 random bits: never a live id, no EXISTS round trip needed to be sure.
        return _ids.new_id()

    async def _aget_new_session_key(self) -> str:
        return _ids.new_id()

    # --- decisions (no I/O) ---------------------------------------------------------

    def _encode_all(self, data: dict[str, Any]) -> dict[str, bytes]:
        serializer = self.serializer()
        return {name: bytes(serializer.dumps(value)) for name, value in data.items()}

    def _decode_all(self, stored: dict[str, bytes]) -> dict[str, Any]:
        serializer = self.serializer()
        data = {}
        for name, raw in stored.items():
            try:
                data[name] = serializer.loads(raw)
            except Exception as exc:
                # Left out of the view and removed at the next save: one unreadable key
                # must not fail every request of its user.
                _security.warning("Session data corrupted: key %r dropped (%s)", name, exc)
        return data

    def _loaded(self, stored: dict[str, bytes] | None) -> dict[str, Any]:
        if stored is None:
            self._session_key = None
            self._stored = None
            return {}
        self._stored = stored
        return self._decode_all(stored)

    def _plan(
        self, data: dict[str, Any], must_create: bool
    ) -> tuple[str, dict[str, bytes], list[str], dict[str, bytes]]:
        """(script mode, fields to write, keys to remove, what Redis then holds)."""
        encoded = self._encode_all(data)
        if must_create:
            return "new", encoded, [], encoded
        stored = self._stored or {}
        changed = {name: raw for name, raw in encoded.items() if stored.get(name) != raw}
        removed = [name for name in stored if name not in encoded]
        return "update", changed, removed, encoded

    def _regen_target(self) -> tuple[str | None, str]:
        """(old id to move from, or None for a session never stored; the new id). The new
        id keeps the old one's tag: both hashes share a Cluster slot, one script moves it."""
        old = self.session_key
        if old is not None and self._stored is not None and _ids.is_valid(old):
            return old, _ids.new_id(_ids.tag_of(old))
        return None, _ids.new_id()

    # --- Django's SessionBase, sync -----------------------------------------------------

    def load(self) -> dict[str, Any]:
        key = self.session_key
        return self._loaded(None if key is None else self._records().fetch(key))

    def exists(self, session_key: str | None) -> bool:
        return session_key is not None and self._records().exists(session_key)

    def create(self) -> None:
        self._session_key = self._get_new_session_key()
        self.save(must_create=True)
        self.modified = True

    def save(self, must_create: bool = False) -> None:
        if self.session_key is None:
            return self.create()
        data = self._get_session(no_load=must_create)
        mode, pairs, removed, held = self._plan(data, must_create)
        key = self.session_key
        if not self._records().write(mode, key, key, pairs, removed, self.get_expiry_age()):
            raise UpdateError
        self._stored = held
        return None

    def delete(self, session_key: str | None = None) -> None:
        if session_key is None:
            if self.session_key is None:
                return
            session_key = self.session_key
        self._records().delete(session_key)

    def cycle_key(self) -> None:
        data = self._session
        old, new = self._regen_target()
        pairs = self._encode_all(data)
        records = self._records()
        age = self.get_expiry_age()
        if old is None or not records.write("regen", old, new, pairs, [], age):
            records.write("new", new, new, pairs, [], age)
        self._session_key = new
        self._session_cache = data
        self._stored = pairs
        self.modified = True

    @classmethod
    def clear_expired(cls) -> None:
        """Nothing to do: Redis expires sessions itself."""

    # --- Django's SessionBase, asyncio ----------------------------------------------------

    async def aload(self) -> dict[str, Any]:
        key = self.session_key
        return self._loaded(None if key is None else await self._arecords().fetch(key))

    async def aexists(self, session_key: str | None) -> bool:
        return session_key is not None and await self._arecords().exists(session_key)

    async def acreate(self) -> None:
        self._session_key = self._get_new_session_key()
        await self.asave(must_create=True)
        self.modified = True

    async def asave(self, must_create: bool = False) -> None:
        if self.session_key is None:
            return await self.acreate()
        data = await self._aget_session(no_load=must_create)
        mode, pairs, removed, held = self._plan(data, must_create)
        key = self.session_key
        age = await self.aget_expiry_age()
        if not await self._arecords().write(mode, key, key, pairs, removed, age):
            raise UpdateError
        self._stored = held
        return None

    async def adelete(self, session_key: str | None = None) -> None:
        if session_key is None:
            if self.session_key is None:
                return
            session_key = self.session_key
        await self._arecords().delete(session_key)

    async def acycle_key(self) -> None:
        data = await self._aget_session()
        old, new = self._regen_target()
        pairs = self._encode_all(data)
        records = self._arecords()
        age = await self.aget_expiry_age()
        if old is None or not await records.write("regen", old, new, pairs, [], age):
            await records.write("new", new, new, pairs, [], age)
        self._session_key = new
        self._session_cache = data
        self._stored = pairs
        self.modified = True

    @classmethod
    async def aclear_expired(cls) -> None:
        """Nothing to do: Redis expires sessions itself."""
