"""mypy --strict accepts correct use of the cache and reports the mistakes, line by line."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

USAGE = Path(__file__).parent / "typing" / "cache_usage.py"


# Serial: mypy takes a whole core for several seconds when its cache is cold, which would
# starve the latency-bound tests of the other worker.
@pytest.mark.serial
def test_mypy_strict_passes_correct_use_and_reports_each_mistake() -> None:
    # mypy's incremental cache of the repository (.mypy_cache, which `mypy src` fills too)
    # saves most of the time after the first run.
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", str(USAGE)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=USAGE.parents[2],
    )
    lines = USAGE.read_text().splitlines()
    expected = {n for n, line in enumerate(lines, 1) if "# MISTAKE" in line}
    reported = {int(m.group(1)) for m in re.finditer(r"cache_usage\.py:(\d+): error", run.stdout)}
    assert reported == expected, run.stdout
    assert "arg-type" in run.stdout and "assignment" in run.stdout, run.stdout
