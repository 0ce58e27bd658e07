import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sync_code_is_generated_from_async_code() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "unasync.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_unasync_rewrites_the_async_names() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import unasync
    finally:
        sys.path.pop(0)
    out = unasync.unasync_text(
        "import redis.asyncio\nclass AsyncLock:\n    async def f(self):\n"
        "        async with x:\n            await async_sleep(1)\n"
    )
    assert "class Lock:" in out
    assert "def f(self):" in out and "async" not in out.split("\n", 1)[1]
    assert "import redis\n" in out
