"""Django's own cache and session tests, unchanged, against seawall.django.

For each release series (the LTS and the current release) the sdist is fetched, its
tests/cache/ and tests/sessions_tests/ extracted, and djangosuite_runner.py runs Django's
RedisCacheTests (on the sync methods, then on the a* methods) and SessionTestsMixin with
the sdist's own Django. Every failure must be listed, with its reason, in docs/django.md
("Django's tests that cannot pass"); a listed test that passes fails this test too, so
the list never goes stale. The two series, and each suite of a series, run side by side,
each in a process and on a database of its own.
"""

from __future__ import annotations

import concurrent.futures
import json
from pathlib import Path
from typing import Any

import pytest
from djangosuites import CACHE, PARTS, SERIES, SuiteSetupError, cannot_pass, prepare, start

# Django skips its culling tests for Redis (the "cull" caches are excluded, as for its
# own RedisCache): Redis bounds memory itself. No other skip is accepted.
DJANGO_SKIP = "Culling isn't implemented."
# A run holds about 250-280 tests; far fewer means the suites were not found.
AT_LEAST = 180


def _results(seawall_server: Any) -> dict[str, dict[str, Any]]:
    try:
        # Side by side: each fetches an sdist and may build a virtualenv (20-30 s cold).
        with concurrent.futures.ThreadPoolExecutor(len(SERIES)) as pool:
            suites = dict(zip(SERIES, pool.map(prepare, SERIES), strict=True))
    except SuiteSetupError as exc:
        pytest.fail(f"cannot set up Django's suites: {exc}", pytrace=False)
    base = seawall_server.url.rsplit("/", 1)[0]
    running = []
    db = 0
    for series, suite in suites.items():
        for part in PARTS:
            db += 1
            out = CACHE / f"results-{suite.version}-{part}.json"
            out.unlink(missing_ok=True)
            running.append((series, suite, out, start(suite, f"{base}/{db}", out, part)))
    results: dict[str, dict[str, Any]] = {}
    for series, suite, out, process in running:
        output = process.communicate(timeout=240)[0].decode(errors="replace")
        if not Path(out).exists():
            pytest.fail(f"Django {suite.version}'s runner wrote no results:\n{output[-3000:]}")
        report = json.loads(Path(out).read_text())
        if "crashed" in report:
            pytest.fail(f"Django {suite.version}'s runner crashed:\n{report['crashed']}")
        assert report["version"] == suite.version, "the Django that ran is not the sdist's"
        merged = results.setdefault(
            series,
            {"version": suite.version, "ran": 0, "passed": [], "failed": {}, "skipped": {}},
        )
        merged["ran"] += report["ran"]
        merged["passed"] += report["passed"]
        merged["failed"].update(report["failed"])
        merged["skipped"].update(report["skipped"])
    return results


def test_djangos_own_cache_and_session_tests_pass(seawall_server: Any) -> None:
    results = _results(seawall_server)
    problems = []
    for series, report in results.items():
        listed = cannot_pass(series)
        failed = report["failed"]
        # "cache/RedisCacheTests.test_x" and "cache-async/..." are listed once, by Django's name.
        unlisted = {
            name: why for name, why in failed.items() if name.split("/", 1)[1] not in listed
        }
        ran = {name.split("/", 1)[1] for name in report["passed"]} | {
            name.split("/", 1)[1] for name in failed
        }
        stale = sorted(
            name
            for name in listed
            if name in ran and not any(f.split("/", 1)[1] == name for f in failed)
        )
        skips = {name: why for name, why in report["skipped"].items() if why != DJANGO_SKIP}
        print(
            f"Django {report['version']}: {report['ran']} tests, {len(report['passed'])} passed, "
            f"{len(failed)} failed, all {len(failed) - len(unlisted)} listed as cannot-pass"
            if not unlisted
            else f"Django {report['version']}: {len(unlisted)} unlisted failures",
            f"({len(report['skipped'])} skipped by Django: {DJANGO_SKIP})",
        )
        if report["ran"] < AT_LEAST:
            problems.append(f"Django {report['version']}: only {report['ran']} tests ran")
        for name, why in sorted(unlisted.items()):
            problems.append(f"Django {report['version']}: {name} failed: {why}")
        for name in stale:
            problems.append(
                f"Django {report['version']}: {name} passes; remove it from docs/django.md's "
                "list of tests that cannot pass"
            )
        for name, why in sorted(skips.items()):
            problems.append(f"Django {report['version']}: {name} was skipped: {why}")
    assert not problems, "\n".join(problems)


def test_the_list_of_tests_that_cannot_pass_gives_a_reason_for_each() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "django.md").read_text()
    section = text.split("## Django's tests that cannot pass", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert rows, "docs/django.md lists no test, or its table's format changed"
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert len(cells) == 3 and len(cells[2]) > 20, f"no reason given: {row}"
    for series in SERIES:
        assert cannot_pass(series), f"the table names no test for Django {series}"
