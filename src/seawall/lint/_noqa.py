"""`# noqa` and `# noqa: SW001,SW005` comments, read the way flake8 and ruff read them."""

from __future__ import annotations

import io
import re
import tokenize

# A bare noqa comment silences every rule on its line; one with codes, only those.
_NOQA = re.compile(
    r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?",
    re.IGNORECASE,
)
ALL = frozenset({"*"})


def suppressions(source: bytes) -> dict[int, frozenset[str]]:
    """Line number -> the codes silenced on it (`ALL` for a bare `# noqa`). Only real
    comments count: a "# noqa" inside a string is text."""
    found: dict[int, frozenset[str]] = {}
    try:
        tokens = list(tokenize.tokenize(io.BytesIO(source).readline))
    except (tokenize.TokenError, SyntaxError):  # the parser accepted it; be lenient anyway
        return found
    for token in tokens:
        if token.type != tokenize.COMMENT:
            continue
        match = _NOQA.search(token.string)
        if match is None:
            continue
        codes = match.group("codes")
        silenced = (
            ALL if codes is None else frozenset(c.upper() for c in re.split(r"[,\s]+", codes) if c)
        )
        found[token.start[0]] = silenced
    return found


def silenced(suppressed: dict[int, frozenset[str]], line: int, code: str) -> bool:
    codes = suppressed.get(line)
    return codes is not None and (codes is ALL or code in codes)
