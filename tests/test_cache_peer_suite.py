"""dogpile.cache's own decorator tests, unchanged, against seawall's cache decorator.

peersuites.py fetches dogpile.cache's sdist (DOGPILE_RELEASE) and runs its
tests/cache/test_decorator.py with dogpilesuite_plugin.py, which puts seawall.Cache's
`cached()` (and, for the multi-key decorator, `get_or_load_many`) behind dogpile's
`CacheRegion.cache_on_arguments` / `cache_multi_on_arguments`. Tests that exercise none of
seawall (dogpile's own key functions) are deselected, as docs/cache-compat.md lists. Each
failure must be listed there, with its reason; a listed test that passes fails this test
too, so the lists never go stale.
"""

from __future__ import annotations

from typing import Any

import peersuites
import pytest

DOC = "cache-compat.md"
CANNOT_PASS = "dogpile.cache's decorator tests that cannot pass"
NOT_RUN = "dogpile.cache's tests not run"
# The release whose tests are run: the newest when this was written (bench compares
# seawall with dogpile.cache>=1.3).
DOGPILE_RELEASE = "1.5.0"
DOGPILE_REQUIREMENTS = ["decorator>=4.0.0", "stevedore>=3.0.0"]
# 1.5.0's DecoratorTest and CacheDecoratorTest hold 26 tests, less those not run;
# far fewer means they were not found.
AT_LEAST = 20


def test_dogpile_caches_own_decorator_tests_pass_with_seawall_cached(seawall_server: Any) -> None:
    not_run = peersuites.cannot_pass(NOT_RUN, DOC)
    try:
        root = peersuites.prepare(
            "dogpile.cache",
            DOGPILE_RELEASE,
            ("dogpile/", "tests/"),
            # dogpile's own setting: its test classes are named *Test.
            pytest_ini="[pytest]\npython_classes = *Test\n",
        )
        deps = peersuites.install_into(root / "deps", DOGPILE_REQUIREMENTS)
        results = peersuites.run_pytest(
            root,
            "tests/cache/test_decorator.py",
            " and ".join(f"not {name}" for name in not_run),
            "dogpilesuite_plugin",
            {
                "SEAWALL_DOGPILE_SUITE_DEPS": str(deps),
                "SEAWALL_DOGPILE_SUITE_REDIS": f"{seawall_server.url.rsplit('/', 1)[0]}/6",
            },
        )
    except peersuites.SuiteSetupError as exc:
        pytest.fail(f"cannot run dogpile.cache's decorator tests: {exc}", pytrace=False)
    listed = peersuites.cannot_pass(CANNOT_PASS, DOC)
    peersuites.check_outcomes(results, listed, AT_LEAST, "dogpile.cache's decorator tests", DOC)
    assert not set(results) & set(not_run), "a test listed as not run ran"


@pytest.mark.parametrize("section", [CANNOT_PASS, NOT_RUN])
def test_each_listed_difference_gives_its_reason(section: str) -> None:
    listed = peersuites.cannot_pass(section, DOC)
    assert listed, f"docs/{DOC} lists nothing under {section!r}, or its format changed"
    for name, why in listed.items():
        assert len(why) > 20, f"no reason given for {name}"
