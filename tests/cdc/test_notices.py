"""The follower's warnings: once per cause, then at most once per interval (pure)."""

from __future__ import annotations

from seawall.cdc._notices import Notices


def test_each_cause_is_said_once_then_again_after_the_interval_with_a_count() -> None:
    now = [0.0]
    notices = Notices(repeat_after=60.0, clock=lambda: now[0])
    assert notices.notice("null:users", "a NULL key") == "a NULL key"
    assert notices.notice("null:users", "a NULL key") is None
    # Another cause is not hidden by the first.
    assert notices.notice("reset:users:TRUNCATE", "TRUNCATE") == "TRUNCATE"
    now[0] = 61.0
    assert notices.notice("null:users", "a NULL key") == (
        "a NULL key (1 more times since it was last said)"
    )
    assert notices.notice("null:users", "a NULL key") is None
