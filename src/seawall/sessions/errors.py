"""What can go wrong with a session, each saying what to do."""

from __future__ import annotations

from seawall.errors import SeawallError


class SessionError(SeawallError):
    """Base class of the session errors."""


class SessionValueError(SessionError, TypeError):
    """A value the session's serializer cannot store (JSON by default). Raised where the
    field is set (or, for an object changed in place, when the response starts), before
    anything is written."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class SessionTooLarge(SessionError, ValueError):
    """The session would exceed its size limit. Raised where the field is set, or when the
    response starts (a value changed in place, or parallel requests that filled the
    session meanwhile); nothing of the request's changes is written."""

    def __init__(self, message: str, *, field: str, size: int, limit: int) -> None:
        super().__init__(message)
        self.field = field
        self.size = size
        self.limit = limit


class SessionClosed(SessionError, RuntimeError):
    """A change to a session after it was saved (the response had started): it would be
    lost, so it is refused."""


class SessionUnavailable(SessionError, ConnectionError):
    """Redis did not answer while loading or saving a session. Nothing was written: the
    request fails (HTTP 500) instead of running with an empty session, which would look
    like a logout and could overwrite the user's data."""
