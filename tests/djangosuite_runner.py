"""Run Django's own cache and session tests against seawall.django, unchanged.

    python djangosuite_runner.py DJANGO_TESTS_DIR REDIS_URL OUT.json [SUITE]

Run by tests/test_django_suites.py in a child process whose Django is the one of the
sdist the tests come from (its folder first on PYTHONPATH). Django points its suites at
a backend through settings and a subclass, as its own runtests.py does for its RedisCache:

- cache: Django's RedisCacheTests (BaseCacheTests and the Redis-specific tests), with
  CACHES built by the suite's own caches_setting_for_tests() on seawall.django.RedisCache;
- cache-async: the same tests with every sync call going through the backend's a* twin
  (djangosuite_async_face.AsyncFacedRedisCache), since Django's tests_async.py only
  covers the dummy backend;
- cache-stale: the same tests with OPTIONS stale_ttl (stale copies kept by get_or_set);
- sessions: Django's SessionTestsMixin with backend = seawall.django.sessions.SessionStore,
  as Django runs it for each of its engines.

Writes {"version", "ran", "passed", "failed", "skipped"} to OUT.json; each test is named
"<suite>/<the Django class that defines it>.<method>". With SUITE, only that suite runs
(tests/test_django_suites.py runs each in a process of its own, side by side: Django's
cache tests spend most of their time asleep, waiting for timeouts to pass).
"""

from __future__ import annotations

import json
import sys
import traceback
import unittest
from typing import Any


def configure(tests_dir: str, url: str) -> None:
    sys.path.insert(0, tests_dir)
    import django
    from django.conf import settings

    settings.configure(
        SECRET_KEY="seawall-django-suites",
        DATABASES={
            "default": {"ENGINE": "django.db.backends.sqlite3"},
            "other": {"ENGINE": "django.db.backends.sqlite3"},
        },
        INSTALLED_APPS=[
            "django.contrib.contenttypes",
            "django.contrib.auth",
            "django.contrib.sessions",
            "cache",
            "sessions_tests",
        ],
        CACHES={"default": {"BACKEND": "seawall.django.RedisCache", "LOCATION": url}},
        SESSION_ENGINE="seawall.django.sessions",
        TEMPLATES=[
            {"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True}
        ],
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
        USE_TZ=False,
    )
    django.setup()


def suites(url: str) -> dict[str, type]:
    import cache.tests as cache_tests
    import sessions_tests.tests as session_tests
    from django.test import SimpleTestCase, override_settings

    from seawall.django.sessions import SessionStore

    def on(backend: str, options: dict[str, Any] | None = None) -> Any:
        params: dict[str, Any] = {"BACKEND": backend, "LOCATION": url}
        if options:
            params["OPTIONS"] = options
        return override_settings(
            CACHES=cache_tests.caches_setting_for_tests(
                base=params, exclude=cache_tests.redis_excluded_caches
            )
        )

    # Django skips RedisCacheTests unless its own backend is configured; the subclass
    # points the same tests at seawall's, so it lifts that skip.
    @on("seawall.django.RedisCache")
    class SeawallRedisCacheTests(cache_tests.RedisCacheTests):  # type: ignore[misc,name-defined]
        __unittest_skip__ = False

    @on("djangosuite_async_face.AsyncFacedRedisCache")
    class SeawallAsyncRedisCacheTests(cache_tests.RedisCacheTests):  # type: ignore[misc,name-defined]
        __unittest_skip__ = False

    # The same tests with stale copies kept (OPTIONS stale_ttl): every write drops them,
    # and nothing Django asks for changes.
    @on("seawall.django.RedisCache", {"stale_ttl": 60.0})
    class SeawallStaleRedisCacheTests(cache_tests.RedisCacheTests):  # type: ignore[misc,name-defined]
        __unittest_skip__ = False

    class SeawallSessionTests(session_tests.SessionTestsMixin, SimpleTestCase):  # type: ignore[misc,name-defined]
        backend = SessionStore

    return {
        "cache": SeawallRedisCacheTests,
        "cache-async": SeawallAsyncRedisCacheTests,
        "cache-stale": SeawallStaleRedisCacheTests,
        "sessions": SeawallSessionTests,
    }


def name_of(suite: str, test: Any) -> str:
    test = getattr(test, "test_case", test)  # a subTest's parent
    method = test._testMethodName
    for klass in type(test).__mro__:
        if method in vars(klass):
            return f"{suite}/{klass.__name__}.{method}"
    return f"{suite}/{type(test).__name__}.{method}"


def run(url: str, only: str | None = None) -> dict[str, Any]:
    import django
    import redis
    from django.conf import settings
    from django.test.utils import get_runner

    runner = get_runner(settings)(verbosity=0, interactive=False)
    runner.setup_test_environment()
    databases = runner.setup_databases()
    report: dict[str, Any] = {
        "version": django.get_version(),
        "ran": 0,
        "passed": [],
        "failed": {},
        "skipped": {},
    }
    try:
        loader = unittest.TestLoader()
        chosen = suites(url)
        if only is not None:
            chosen = {only: chosen[only]}
        for suite, klass in chosen.items():
            # Each suite starts on an empty database, as Django's own run starts on a
            # fresh server: clear() here leaves other caches' keys (see docs/django.md).
            flush = redis.Redis.from_url(url)
            flush.flushdb()
            flush.close()
            result = unittest.TestResult()
            loader.loadTestsFromTestCase(klass).run(result)
            bad = {}
            for test, text in (
                result.failures
                + result.errors
                + [(t, "unexpected success") for t in result.unexpectedSuccesses]
            ):
                bad.setdefault(name_of(suite, test), text.strip().splitlines()[-1][:500])
            skipped = {name_of(suite, test): reason for test, reason in result.skipped}
            names = {name_of(suite, test) for test in loader.loadTestsFromTestCase(klass)}
            report["ran"] += len(names)
            report["failed"].update(bad)
            report["skipped"].update(skipped)
            report["passed"] += sorted(names - set(bad) - set(skipped))
    finally:
        runner.teardown_databases(databases)
        runner.teardown_test_environment()
    return report


def main(argv: list[str]) -> int:
    tests_dir, url, out, *only = argv
    try:
        configure(tests_dir, url)
        report = run(url, *only)
    except BaseException:
        report = {"crashed": traceback.format_exc()}
    with open(out, "w") as file:
        json.dump(report, file, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
