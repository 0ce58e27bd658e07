"""Sessions in Redis: load-and-slide in one round trip, save a request's changes in one.

The decisions (what to write, the cookie, sizes) are in seawall.sessions._session; this
module only runs the scripts (seawall/sessions/session_*.lua) and maps their replies.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import redis.exceptions

from seawall.sessions import _ids, _plan, _session
from seawall.sessions._options import SessionOptions
from seawall.sessions._plan import SavePlan
from seawall.sessions._session import Session
from seawall.sessions.errors import SessionTooLarge, SessionUnavailable
from seawall.shared import _scripts
from seawall.shared._async.scripts import run_script
from seawall.shared._validate import AsyncClient

_LOAD = _scripts.load("seawall.sessions", "session_load")
_SAVE = _scripts.load("seawall.sessions", "session_save")
_LOGOUT = _scripts.load("seawall.sessions", "session_logout")
# A logout whose index changes under it this many times in a row (logins landing on
# every attempt) gives up.
_LOGOUT_ATTEMPTS = 50

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
        """Write what the request changed; returns the plan, whose `cookie` says what the
        response does with the cookie ("set" to cookie_id, "drop", or None: send none).
        Closes the session: later changes raise.

        Raises SessionTooLarge or SessionValueError before anything is written, and
        SessionUnavailable when Redis does not answer."""
        session.close()
        plan = _plan.plan(session, int(time.time() * 1000))
        if plan.mode is None:
            return plan
        if plan.retire_id is not None:
            retire = SavePlan(
                "retire",
                plan.retire_id,
                index_user=plan.retire_user,
                index_remove=plan.retire_id if plan.retire_user is not None else None,
            )
            if await self._run(retire) == 0:
                return _ended(plan)
        reply = await self._run(plan)
        if reply == 0:
            return _ended(plan)
        return plan

    async def _run(self, plan: SavePlan) -> int:
        """Run the save script for `plan`; 1 written, 0 the session had ended."""
        opts = self.options
        assert plan.session_id is not None
        key = _ids.key(opts.prefix, plan.session_id)
        target = key if plan.new_id is None else _ids.key(opts.prefix, plan.new_id)
        args: list[Any] = [plan.mode, opts.max_age_ms, opts.lifetime_ms, opts.max_size]
        args.append(len(plan.pairs))
        for name, raw in plan.pairs:
            args += [name, raw]
        args += plan.removed
        keys = [key, target]
        if plan.index_user is not None:
            keys.append(_ids.user_index_key(opts.prefix, plan.index_user))
            args.append(_ids.handle(plan.index_add) if plan.index_add else "")
            args.append(_ids.handle(plan.index_remove) if plan.index_remove else "")
        try:
            reply = await run_script(self.client, _SAVE, keys, args)
        except _DOWN as exc:
            raise _unavailable("saving", key, exc) from exc
        code = int(reply[0])
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
        return code

    async def logout_everywhere(self, user_id: str | int) -> int:
        """End every session bound to `user_id`; returns how many were live."""
        opts = self.options
        index = _ids.user_index_key(opts.prefix, str(user_id))
        for _ in range(_LOGOUT_ATTEMPTS):
            try:
                handles = [_scripts.reply_text(h) for h in await self.client.smembers(index)]
                keys = [_ids.key_of_handle(opts.prefix, handle) for handle in handles]
                ended = int(await run_script(self.client, _LOGOUT, [index, *keys], handles))
            except _DOWN as exc:
                raise _unavailable("logging out", index, exc) from exc
            if ended >= 0:
                return ended
        raise SessionUnavailable(
            f"logout_everywhere({user_id!r}): the index {index!r} changed on each of "
            f"{_LOGOUT_ATTEMPTS} attempts (sessions of this user saved all the while); "
            "nothing was ended: try again"
        )


def _ended(plan: SavePlan) -> SavePlan:
    # Ended meanwhile (expired, logged out everywhere, regenerated in parallel): nothing
    # was written, and the response sends no cookie. Dropping it could overwrite the new
    # id a parallel login has just sent; the browser's next request drops the dead one.
    return dataclasses.replace(plan, mode=None, cookie=None)


def _unavailable(doing: str, key: str, exc: BaseException) -> SessionUnavailable:
    return SessionUnavailable(
        f"Redis did not answer while {doing} session {key!r} ({exc}); nothing was written "
        "and the request fails rather than run with an empty session: check that Redis "
        "is up and reachable from this process"
    )
