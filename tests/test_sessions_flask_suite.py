"""Flask's own session and flash tests, unchanged, with seawall's session interface.

flasksuite.py fetches the installed Flask's sdist, extracts its tests/ and runs the tests
of tests/test_basic.py named *session* or *flash*, every app with RedisSessionInterface
(flasksuite_plugin.py). Each failure must be listed, with its reason, in docs/sessions.md
("Flask's tests that cannot pass"); a listed test that passes fails this test too, so the
list never goes stale.
"""

from __future__ import annotations

from typing import Any

import flasksuite
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
