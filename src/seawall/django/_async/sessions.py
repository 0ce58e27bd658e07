"""The Redis side of seawall.django.sessions: seawall.sessions' store, driven by Django.

One hash per session ("d:<name>" -> the value serialized alone, "m:created"), named from
the session id as seawall.sessions names it (the key holds a digest of the id, never the
id). A save writes only the fields the request changed and removes only those it deleted,
in seawall.sessions' own script (session_save.lua), so parallel requests of one user that
change different keys keep both changes.
"""

from __future__ import annotations

from typing import Any

import redis.exceptions

from seawall.sessions import _ids
from seawall.sessions._async.store import _SAVE
from seawall.sessions.errors import SessionTooLarge, SessionUnavailable
from seawall.shared import _scripts
from seawall.shared._async.scripts import run_script
from seawall.shared._validate import AsyncClient

DATA = "d:"
# Django has no absolute lifetime: each save sets the expiry it computes (get_expiry_age).
NO_LIFETIME_MS = 100 * 365 * 86_400_000
_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, TimeoutError)


class AsyncSessionRecords:
    """Read and write Django sessions as seawall.sessions stores them."""

    def __init__(self, client: AsyncClient, prefix: str, max_size: int) -> None:
        self.client = client
        self.prefix = prefix
        self.max_size = max_size

    def key(self, session_id: str) -> str | None:
        """The hash of `session_id`, or None for an id seawall never issues (it is never
        looked up: a forged or foreign id is simply no session)."""
        if not _ids.is_valid(session_id):
            return None
        return _ids.key(self.prefix, session_id)

    async def fetch(self, session_id: str) -> dict[str, bytes] | None:
        """The session's stored fields (name -> serialized value), None if none is live."""
        key = self.key(session_id)
        if key is None:
            return None
        try:
            fields = await self.client.hgetall(key)
        except _DOWN as exc:
            raise _unavailable("loading", key, exc) from exc
        if not fields:
            return None
        found = {}
        for name, raw in fields.items():
            text = _scripts.reply_text(name)
            if text.startswith(DATA):
                found[text[len(DATA) :]] = raw if isinstance(raw, bytes) else raw.encode()
        return found

    async def exists(self, session_id: str) -> bool:
        key = self.key(session_id)
        return key is not None and bool(await self.client.exists(key))

    async def delete(self, session_id: str) -> None:
        key = self.key(session_id)
        if key is not None:
            await self.client.delete(key)

    async def write(
        self,
        mode: str,
        session_id: str,
        target_id: str,
        pairs: dict[str, bytes],
        removed: list[str],
        max_age: float,
    ) -> bool:
        """Run session_save.lua; False when the session ended meanwhile (nothing written).

        `mode` is the script's ("new", "update", "regen", ...), `target_id` the new id of
        a regeneration (else `session_id`); `max_age` seconds (<= 0: gone at once)."""
        key = _ids.key(self.prefix, session_id)
        target = _ids.key(self.prefix, target_id)
        args: list[Any] = [mode, int(max_age * 1000), NO_LIFETIME_MS, self.max_size, len(pairs)]
        for name, raw in pairs.items():
            args += [DATA + name, raw]
        args += [DATA + name for name in removed]
        try:
            reply = await run_script(self.client, _SAVE, [key, target], args)
        except _DOWN as exc:
            raise _unavailable("saving", key, exc) from exc
        code = int(reply[0])
        if code == -1:
            field = _scripts.reply_text(reply[1])
            size = int(reply[2])
            raise SessionTooLarge(
                f"session {_ids.handle(session_id)} would hold {size} bytes, over its limit "
                f"of {self.max_size} (SEAWALL_SESSION_MAX_SIZE); its largest field is "
                f"{field!r}; nothing of this request was written",
                field=field,
                size=size,
                limit=self.max_size,
            )
        return code == 1


def _unavailable(doing: str, key: str, exc: BaseException) -> SessionUnavailable:
    return SessionUnavailable(
        f"Redis did not answer while {doing} session {key!r} ({exc}); nothing was written: "
        "check that the Redis of SESSION_CACHE_ALIAS's cache is up and reachable"
    )
