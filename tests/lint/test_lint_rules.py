"""Every rule against its fixtures: bad code flagged on exactly the marked lines, good code
(and non-redis objects that look alike) never flagged.

A fixture line that must be reported ends with `# expect: SW00N`; the test reads the
markers and compares them with what the linter reports, line by line and code by code.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from seawall.lint import BY_CODE, RULES, lint_source

FIXTURES = Path(__file__).parent / "fixtures"
_EXPECT = re.compile(r"# expect: ((?:SW\d{3}\s*)+)$")


def _expected(path: Path) -> set[tuple[int, str]]:
    marks = set()
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        found = _EXPECT.search(line)
        if found:
            marks |= {(number, code) for code in found.group(1).split()}
    return marks


def _reported(path: Path) -> set[tuple[int, str]]:
    return {(f.line, f.rule) for f in lint_source(path.read_bytes(), str(path))}


BAD = sorted(FIXTURES.glob("*_bad.py"))
GOOD = sorted(FIXTURES.glob("*_good.py"))


def test_every_rule_has_bad_and_good_fixtures() -> None:
    for rule in RULES:
        stem = rule.code.lower()
        assert (FIXTURES / f"{stem}_bad.py").exists(), rule.code
        assert (FIXTURES / f"{stem}_good.py").exists(), rule.code
        marked = {code for _, code in _expected(FIXTURES / f"{stem}_bad.py")}
        assert marked == {rule.code}, f"{stem}_bad.py should exercise {rule.code} only"


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_code_is_reported_on_exactly_the_marked_lines(path: Path) -> None:
    expected = _expected(path)
    assert len(expected) >= 3, "a bad fixture needs several examples"
    reported = _reported(path)
    assert sorted(reported - expected) == [], "reported but not expected"
    assert sorted(expected - reported) == [], "expected but not reported"


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.stem)
def test_good_code_is_not_reported(path: Path) -> None:
    assert _expected(path) == set()
    assert lint_source(path.read_bytes(), str(path)) == []


def test_exact_lines_of_one_fixture() -> None:
    # The markers above drive most checks; this one spells the lines out, so a marker
    # parser that read nothing could not make every test pass.
    reported = sorted(_reported(FIXTURES / "sw003_bad.py"))
    assert reported == [(11, "SW003"), (19, "SW003"), (31, "SW003"), (38, "SW003")]


def test_every_rule_documents_why_and_where_from() -> None:
    for rule in RULES:
        assert re.fullmatch(r"SW\d{3}", rule.code)
        assert len(rule.rationale) > 200, rule.code
        assert "Fix:" in rule.rationale, rule.code
        assert re.search(r"seed 00\d", rule.rationale), f"{rule.code} cites no guideline/seed"
    assert list(BY_CODE) == sorted(BY_CODE)


def test_messages_say_what_to_do_instead() -> None:
    for path in BAD:
        for finding in lint_source(path.read_bytes(), str(path)):
            assert re.search(r"\b(use|pass|send|queue|delete|iterate|take)\b", finding.message), (
                finding
            )


def test_seed_003_recipe_as_python() -> None:
    # Seed 003's lock(), transcribed: the SETNX+EXPIRE pair, the "TTL < 0" repair, and the
    # DEL that breaks a lock it believes expired.
    source = """
import time
import redis

r = redis.Redis(socket_timeout=1.0)

def lock(key, expire_secs, timeout):
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if r.setnx(key, str(time.time())) == 1:
            r.expire(key, expire_secs)
            return True
        time.sleep(0.003)
    if r.ttl(key) < 0:
        r.setnx(key, str(time.time()))
        r.expire(key, expire_secs)
        return True
    if time.time() - float(r.get(key)) > expire_secs:
        r.delete(key)
        r.setnx(key, str(time.time()))
        r.expire(key, expire_secs)
        return True
    return False
"""
    reported = [(f.line, f.rule) for f in lint_source(source)]
    assert reported == [
        (10, "SW003"),
        (15, "SW003"),
        (19, "SW005"),
        (20, "SW003"),
    ]


def test_seed_000_recipe_as_python() -> None:
    # Seed 000's acquire(), transcribed: SETNX of a deadline, GET, GETSET to steal.
    source = """
import time
import redis

def acquire(jedis: redis.Redis, lock_key: str, expires: int) -> bool:
    timeout = 10_000
    while timeout >= 0:
        if jedis.setnx(lock_key, str(expires)) == 1:
            return True
        current = jedis.get(lock_key)
        if current is not None and int(current) < time.time() * 1000:
            old = jedis.getset(lock_key, str(expires))
            if old is not None and old == current:
                return True
        timeout -= 100
        time.sleep(0.1)
    return False
"""
    assert [(f.line, f.rule) for f in lint_source(source)] == [(12, "SW004")]


def test_set_nx_with_expiry_scan_iter_and_unlink_are_fine() -> None:
    source = """
import redis
r = redis.Redis(socket_timeout=1.0)
r.set("lock:a", "token", nx=True, ex=10)
for key in r.scan_iter(match="tmp:*"):
    pass
r.unlink("big")
r.unlink(*list(r.scan_iter(match="tmp:*")))
"""
    assert lint_source(source) == []


def test_files_without_redis_only_match_long_names() -> None:
    # No redis import: a bare `r` is some other object; `redis_client` still reads as one.
    source = """
def f(r, redis_client, keys):
    r.keys()
    redis_client.keys()
    for k in keys:
        r.get(k)
"""
    assert [(f.line, f.rule) for f in lint_source(source)] == [(4, "SW001")]


def test_docs_describe_every_rule() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "lint.md").read_text()
    for rule in RULES:
        assert f"### {rule.code} `{rule.name}`" in docs, rule.code


def test_loop_message_names_the_batched_form() -> None:
    messages = {f.line: f.message for f in lint_source((FIXTURES / "sw006_bad.py").read_bytes())}
    assert "send one MGET of all the keys" in messages[12]
    assert "send one UNLINK of all the keys" in messages[34]
    assert "send one SADD of all the members" in messages[47]
    assert messages[22].startswith("ZSCORE sent once per loop iteration")
    assert "queue the commands on a pipeline(transaction=False)" in messages[22]


def test_setnx_and_expire_on_one_pipeline_name_the_real_problem() -> None:
    # No crash splits a queued pair; the hazard is EXPIRE running when SETNX failed.
    messages = {f.line: f.message for f in lint_source((FIXTURES / "keys_bad.py").read_bytes())}
    assert "the expiry is set even when SETNX failed" in messages[24]
    assert "crash" not in messages[24]


def _loop_of_calls(count: int) -> str:
    # One loop whose every GET reads a key computed from the previous reply: each call
    # depends on the loop variable through a chain of names.
    lines = ["import redis", "r = redis.Redis(socket_timeout=1.0)", "def f(ids):"]
    lines += ["    for i in ids:", "        k0 = f'a:{i}'"]
    for n in range(count):
        lines += [f"        v{n} = r.get(k{n} + 'x')", f"        k{n + 1} = v{n}"]
    return "\n".join(lines) + "\n"


def test_loop_rule_is_linear_in_the_calls_of_one_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    # Count the syntax nodes the linter visits: linear work grows 6x from 50 to 300
    # calls; the old per-call recomputation grew about 36x.
    import ast

    visited = 0
    walk = ast.walk

    def counting_walk(node: ast.AST) -> Iterator[ast.AST]:
        nonlocal visited
        for child in walk(node):
            visited += 1
            yield child

    monkeypatch.setattr(ast, "walk", counting_walk)
    counts = {}
    for size in (50, 300):
        visited = 0
        assert len(lint_source(_loop_of_calls(size))) == size
        counts[size] = visited
    assert counts[300] < 10 * counts[50], counts
    monkeypatch.undo()
    started = time.perf_counter()
    lint_source(_loop_of_calls(300))
    assert time.perf_counter() - started < 3.0  # about 0.1 s; it took 8-20 s when quadratic


def _keys_of_many_calls(count: int) -> str:
    lines = ["import redis", "r = redis.Redis(socket_timeout=1.0)", "def f(a):"]
    for n in range(count):
        lines.append(f"    if r.get('k{n}') == a: r.delete('k{n}')")
        lines.append(f"    r.set('lock{n}', 1, nx=True, ex=5)")
        lines.append(f"    r.hgetall('h{n}'); r.hlen('h{n}'); r.hset('h{n}', a, 1)")
    return "\n".join(lines) + "\n"


def test_rules_that_pair_calls_by_key_are_linear(monkeypatch: pytest.MonkeyPatch) -> None:
    # SW003/4/5/7/9 pair calls naming one key; each key is written out (ast.dump) once
    # per call, then looked up, instead of compared with every other call's key.
    import ast

    dumps = 0
    dump = ast.dump

    def counting_dump(node: ast.AST, *args: object, **kwargs: object) -> str:
        nonlocal dumps
        dumps += 1
        return dump(node, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ast, "dump", counting_dump)
    counts = {}
    for size in (50, 300):
        dumps = 0
        assert len(lint_source(_keys_of_many_calls(size))) == size  # the GET-compare-DELs
        counts[size] = dumps
    assert counts[300] < 10 * counts[50], counts
