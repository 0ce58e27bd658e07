"""Flask's own session and flash tests, unchanged, with seawall's session interface.

flasksuite.py fetches the installed Flask's sdist, extracts its tests/ and runs the tests
of tests/test_basic.py named *session* or *flash*, every app with RedisSessionInterface
(flasksuite_plugin.py). Each failure must be listed, with its reason, in docs/sessions.md
("Flask's tests that cannot pass"); a listed test that passes fails this test too, so the
list never goes stale.

It also runs Flask-Session's own tests: test_session.py of Flask-Session 0.5.0's sdist (the
last sdist that ships tests; 0.6.0 on ship none), with flasksessionsuite_plugin.py, which
gives `Session(app)` seawall's interface where it would build Flask-Session's Redis one.
Its tests of other stores and of its null session are not run, as docs/sessions.md lists.
"""

from __future__ import annotations

from typing import Any

import flasksuite
import peersuites
import pytest

# Flask 3.1's test_basic.py holds 15 such tests; far fewer means they were not found.
AT_LEAST = 12


def test_flasks_own_session_and_flash_tests_pass(seawall_server: Any) -> None:
    try:
        tests = flasksuite.prepare()
        url = f"{seawall_server.url.rsplit('/', 1)[0]}/3"
        results = flasksuite.run(tests, url, flasksuite.CACHE / "results.json")
    except flasksuite.SuiteSetupError as exc:
        pytest.fail(f"cannot run Flask's tests: {exc}", pytrace=False)
    listed = flasksuite.cannot_pass()
    failed = {name for name, outcome in results.items() if outcome != "passed"}
    passed = set(results) - failed
    print(f"Flask's tests: {len(passed)} passed, {len(failed)} listed as cannot-pass")
    assert len(results) >= AT_LEAST, f"only {len(results)} of Flask's tests ran"
    assert not failed - listed, f"unlisted failures: {sorted(failed - listed)}"
    assert not passed & listed, (
        f"{sorted(passed & listed)} pass: remove them from docs/sessions.md's list"
    )
    assert listed <= set(results), f"listed but not run: {sorted(listed - set(results))}"


# The last Flask-Session sdist with tests (0.2 to 0.5.0 ship test_session.py; 0.1, 0.1.1
# and 0.6.0 on ship none).
FLASK_SESSION_RELEASE = "0.5.0"
FLASK_SESSION_NOT_RUN = "Flask-Session's tests"


def test_flask_sessions_own_tests_pass_with_seawalls_interface(seawall_server: Any) -> None:
    not_run = peersuites.cannot_pass(FLASK_SESSION_NOT_RUN, "sessions.md")
    try:
        root = peersuites.prepare(
            "Flask-Session", FLASK_SESSION_RELEASE, ("src/", "test_session.py")
        )
        results = peersuites.run_pytest(
            root,
            "test_session.py",
            " and ".join(f"not {name}" for name in not_run),
            "flasksessionsuite_plugin",
            {
                "SEAWALL_FLASK_SESSION_SRC": str(root / "src"),
                "SEAWALL_FLASK_SESSION_SUITE_REDIS": f"{seawall_server.url.rsplit('/', 1)[0]}/7",
            },
        )
    except peersuites.SuiteSetupError as exc:
        pytest.fail(f"cannot run Flask-Session's tests: {exc}", pytrace=False)
    failed = sorted(name for name, outcome in results.items() if outcome != "passed")
    print(f"Flask-Session's tests: {len(results) - len(failed)} of {len(results)} passed")
    # Its two Redis tests: test_redis_session and test_session_use_signer.
    assert len(results) >= 2, f"only {len(results)} of Flask-Session's tests ran"
    assert not failed, f"Flask-Session's tests failed: {failed}"
    assert not set(results) & set(not_run), "a test listed as not run ran"


def test_each_flask_session_test_not_run_gives_its_reason() -> None:
    listed = peersuites.cannot_pass(FLASK_SESSION_NOT_RUN, "sessions.md")
    assert len(listed) >= 5, f"docs/sessions.md lists {sorted(listed)} only, or its format changed"
    for name, why in listed.items():
        assert len(why) > 20, f"no reason given for {name}"
