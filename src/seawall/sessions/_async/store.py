"""Sessions in Redis: load-and-slide in one round trip, save a request's changes in one.

The decisions (what to write, the cookie, sizes) are in seawall.sessions._session; this
module only runs the scripts (seawall/sessions/session_*.lua) and maps their replies.
"""

from __future__ import annotations

from typing import Any

import redis.exceptions

from seawall.sessions import _ids, _session
from seawall.sessions._options import SessionOptions
from seawall.sessions._session import SavePlan, Session
from seawall.sessions.errors import SessionTooLarge, SessionUnavailable
from seawall.shared import _scripts
from seawall.shared._async.scripts import run_script
from seawall.shared._validate import AsyncClient

_LOAD = _scripts.load("seawall.sessions", "session_load")
_SAVE = _scripts.load("seawall.sessions", "session_save")
_BIND = _scripts.load("seawall.sessions", "session_bind")

_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, TimeoutError)


class AsyncSessionStore:
    """Load and save sessions of one web app on `client` (a redis-py client)."""

    def __init__(
        self,
        client: AsyncClient,
        options: SessionOptions,
        *,
        session_class: type[Session] = Session,
    ) -> None:
        self.client = client
        self.options = options
        self.session_class = session_class

    async def load(self, cookie_value: str | None, *, writable: bool = True) -> Session:
        """The session the cookie names; a new empty one for no cookie, or an unknown,
        expired or malformed id (never an error, never another session's data)."""
        opts = self.options
        if cookie_value is None or not _ids.is_valid(cookie_value):
            return self.session_class(opts, sent_cookie=cookie_value is not None, writable=writable)
        key = _ids.key(opts.prefix, cookie_value)
        try:
            reply = await run_script(self.client, _LOAD, [key], [opts.max_age_ms, opts.lifetime_ms])
        except _DOWN as exc:
            raise _unavailable("loading", key, exc) from exc
        if not reply:
            return self.session_class(opts, sent_cookie=True, writable=writable)
        return _session.from_reply(self.session_class, opts, cookie_value, reply, writable)

    async def save(self, session: Session) -> SavePlan:
        """Write what the request changed; returns the plan, whose cookie_id the response's
        cookie carries (None: drop the cookie). Closes the session: later changes raise.

        Raises SessionTooLarge or SessionValueError before anything is written, and
        SessionUnavailable when Redis does not answer."""
        session.close()
        plan = _session.plan(session)
        if plan.mode is None:
            return plan
        opts = self.options
        assert plan.session_id is not None
        key = _ids.key(opts.prefix, plan.session_id)
        target = key if plan.new_id is None else _ids.key(opts.prefix, plan.new_id)
        args: list[Any] = [plan.mode, opts.max_age_ms, opts.lifetime_ms, opts.max_size]
        args.append(len(plan.pairs))
        for name, raw in plan.pairs:
            args += [name, raw]
        args += plan.removed
        try:
            reply = await run_script(self.client, _SAVE, [key, target], args)
        except _DOWN as exc:
            raise _unavailable("saving", key, exc) from exc
        code = int(reply[0])
        if code == 0:
            # Ended meanwhile (expired, logged out everywhere, regenerated in parallel):
            # nothing was written and the browser's cookie is dropped.
            return SavePlan(None, None)
        if code == -1:
            field = _scripts.reply_text(reply[1])
            size = int(reply[2])
            raise SessionTooLarge(
                f"session {_ids.handle(plan.session_id)} would hold {size} bytes with what "
                f"parallel requests stored, over its limit of {opts.max_size} (max_size); "
                f"its largest field is {field!r}; nothing of this request was written",
                field=field,
                size=size,
                limit=opts.max_size,
            )
        if plan.bind and session.user_id is not None:
            await self._bind(session.user_id, plan.cookie_id)
        return plan

    async def _bind(self, user_id: str, session_id: str | None) -> None:
        assert session_id is not None
        opts = self.options
        index = _ids.user_index_key(opts.prefix, user_id)
        try:
            await run_script(
                self.client, _BIND, [index], [_ids.handle(session_id), opts.lifetime_ms]
            )
        except _DOWN as exc:
            raise _unavailable("indexing", index, exc) from exc

    async def logout_everywhere(self, user_id: str | int) -> int:
        """End every session bound to `user_id`; returns how many were live."""
        opts = self.options
        index = _ids.user_index_key(opts.prefix, str(user_id))
        handles = await self.client.smembers(index)
        ended = 0
        for handle in handles:
            key = _ids.key_of_handle(opts.prefix, _scripts.reply_text(handle))
            ended += int(await self.client.delete(key))
        await self.client.delete(index)
        return ended


def _unavailable(doing: str, key: str, exc: BaseException) -> SessionUnavailable:
    return SessionUnavailable(
        f"Redis did not answer while {doing} session {key!r} ({exc}); nothing was written "
        "and the request fails rather than run with an empty session: check that Redis "
        "is up and reachable from this process"
    )
