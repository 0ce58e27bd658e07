"""How seawall.Cache names its Redis keys and turns values into bytes. No I/O.

Values are JSON by default, read back exactly (see _json). msgpack is available
with the `seawall[msgpack]` extra. pickle is only used when asked for by name:
unpickling runs code chosen by whoever wrote the bytes, so anyone able to write to the
Redis server could then run code in every process reading the cache. Choose it only
when Redis is as trusted as the processes themselves.
"""

from __future__ import annotations

import functools
import pickle
from dataclasses import dataclass
from typing import Any, Protocol

from seawall.cache._json import JsonSerializer
from seawall.errors import CacheSerializationError
from seawall.shared._keys import PREFIX, tagged

# Cache entries that record "the loader found nothing" hold this payload: no serializer
# here encodes any value as zero bytes.
ABSENT_PAYLOAD = b""

# Wake-up channels of processes waiting for a value: "<CACHE_WAKE_PREFIX><waiter id>".
CACHE_WAKE_PREFIX = f"{PREFIX}:cachewake:"


class Serializer(Protocol):
    def dumps(self, value: Any) -> bytes: ...

    def loads(self, data: bytes) -> Any: ...


class MsgpackSerializer:
    name = "msgpack"

    def __init__(self) -> None:
        try:
            import msgpack  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise ImportError(
                "serializer='msgpack' needs the msgpack package: pip install 'seawall[msgpack]'"
            ) from None
        self._msgpack: Any = msgpack

    def dumps(self, value: Any) -> bytes:
        return bytes(self._msgpack.packb(value, use_bin_type=True))

    def loads(self, data: bytes) -> Any:
        return self._msgpack.unpackb(data, raw=False)


class PickleSerializer:
    """Only on request: see the module's docstring for why."""

    name = "pickle"

    def dumps(self, value: Any) -> bytes:
        return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)

    def loads(self, data: bytes) -> Any:
        return pickle.loads(data)


def make_serializer(choice: Any, compress_over: int | None = None) -> Serializer:
    if compress_over is not None and (
        isinstance(compress_over, bool) or not isinstance(compress_over, int) or compress_over < 0
    ):
        raise ValueError(
            f"compress_over must be an int >= 0 (payloads larger than that many bytes are "
            f"compressed) or None, got {compress_over!r}"
        )
    if compress_over is not None and choice != "json":
        raise ValueError(
            f"compress_over works with serializer='json' only, got serializer={choice!r}"
        )
    if choice == "json":
        return JsonSerializer(compress_over)
    if choice == "msgpack":
        return MsgpackSerializer()
    if choice == "pickle":
        return PickleSerializer()
    if hasattr(choice, "dumps") and hasattr(choice, "loads"):
        return choice  # type: ignore[no-any-return]
    raise ValueError(
        f"serializer must be 'json', 'msgpack', 'pickle' or an object with dumps() and "
        f"loads(), got {choice!r}"
    )


def check_serializer_fits_client(
    serializer: Serializer, decode_responses: bool, namespace: str
) -> None:
    """Refuse a binary serializer on a client that decodes replies to str.

    pickle and msgpack write bytes that are not UTF-8: a client with decode_responses=True
    fails to decode every reply that carries such a value, so once one process writes a
    key, every process reading it through such a client fails on it.
    """
    name = getattr(serializer, "name", None)
    if decode_responses and getattr(serializer, "compress_over", None) is not None:
        raise ValueError(
            f"cache {namespace!r}: the client was made with decode_responses=True, which "
            "cannot read compressed values; give the cache a client made with "
            "decode_responses=False (the default), or leave compress_over unset"
        )
    if decode_responses and name in ("pickle", "msgpack"):
        raise ValueError(
            f"cache {namespace!r}: the client was made with decode_responses=True, which "
            f"cannot read the binary values the {name} serializer writes; give the cache a "
            f"client made with decode_responses=False (the default), e.g. "
            f"redis.Redis.from_url(url), or use serializer='json'"
        )


def encode(serializer: Serializer, value: Any, namespace: str, key: str) -> bytes:
    """The payload stored for `value`; CacheSerializationError (nothing written) if it fails."""
    if value is None:
        return ABSENT_PAYLOAD
    try:
        data = serializer.dumps(value)
    except Exception as exc:
        raise CacheSerializationError(
            f"cache {namespace!r}: the value for key {key!r} cannot be encoded by the "
            f"{getattr(serializer, 'name', type(serializer).__qualname__)} serializer "
            f"({exc}); convert it to plain types first, or choose another serializer",
            key=key,
        ) from exc
    if not isinstance(data, bytes | bytearray) or not data:
        raise CacheSerializationError(
            f"cache {namespace!r}: the serializer returned {type(data).__qualname__} "
            f"for key {key!r}; dumps() must return non-empty bytes",
            key=key,
        )
    return bytes(data)


def canonical(serializer: Serializer, value: Any, payload: bytes) -> Any:
    """What every other reader of `payload` gets: the value a loading or writing caller
    returns and keeps in its L1, so all callers everywhere see one type (a list where
    msgpack turns a tuple into one). The default serializer reads back exactly what it
    was given, so `value` itself is that."""
    if value is None or getattr(serializer, "exact", False):
        return value
    return serializer.loads(payload)


def cache_key(key: Any, namespace: str) -> str:
    """The text form of a user's key: str as is, int in decimal, bytes as UTF-8."""
    if isinstance(key, str):
        text = key
    elif isinstance(key, int) and not isinstance(key, bool):
        text = str(key)
    elif isinstance(key, bytes):
        try:
            text = key.decode()
        except UnicodeDecodeError:
            raise TypeError(
                f"cache {namespace!r}: key {key!r} is not UTF-8; decode it or pass a str"
            ) from None
    else:
        raise TypeError(
            f"cache {namespace!r}: a key must be str, bytes or int, got "
            f"{type(key).__qualname__}: {key!r}; build a string key from it"
        )
    return text


@dataclass(frozen=True, slots=True)
class CacheKeys:
    value: str  # "<stale window ms>:<last load ms>:<payload>"; lives fresh time + stale window
    lease: str  # token of the process elected to load; gone when nobody loads
    waiters: str  # ids of processes waiting for the value
    hit: str  # lead (ms); lives until `lead` before the value turns stale (see cache_store)
    version: str  # the version of a versioned set, or a versioned delete's tombstone
    all: tuple[str, str, str, str]  # the keys the scripts take, in their order
    read: tuple[str, str]  # what a fresh hit reads with one MGET: value, hit marker


_CACHE_HEAD = f"{PREFIX}:cache:"
_DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _base36(number: int) -> str:
    text = ""
    while number:
        number, digit = divmod(number, 36)
        text = _DIGITS[digit] + text
    return text


@functools.lru_cache(maxsize=4096)  # hot keys are asked for again and again
def cache_keys(namespace: str, key: str, generation: int = 0) -> CacheKeys:
    """Keys of one cache entry; they share one hash tag, so the scripts run on Cluster.

    Generation 0 (a namespace never cleared) has the names "seawall:cache:<form>:<suffix>"
    (see _keys.tagged). A later generation G has "seawall:cache:@<G in base 36>/<form>:..."
    instead: "@" never starts a generation-0 form, so names never collide, and the hash tag
    is the same, so an entry keeps its slot. The version (or tombstone) of a key is not
    per generation: clear() forgets values, not which version a key last had.
    """
    base = tagged("cache", f"{namespace}:{key}")
    version = f"{base}:version"
    if generation:
        base = f"{_CACHE_HEAD}@{_base36(generation)}/{base[len(_CACHE_HEAD) :]}"
    value, lease, waiters = f"{base}:value", f"{base}:lease", f"{base}:waiters"
    hit = f"{base}:hit"
    return CacheKeys(
        value=value,
        lease=lease,
        waiters=waiters,
        hit=hit,
        version=version,
        all=(value, lease, waiters, hit),
        read=(value, hit),
    )


@functools.lru_cache(maxsize=1024)
def generation_key(namespace: str) -> str:
    """The key holding a namespace's generation (absent: 0, never cleared). Its own hash
    tag, so on Cluster it sits on one node whatever its entries' slots."""
    return tagged("cachegen", namespace)


def parse_generation(reply: Any) -> int:
    """A generation as Redis replied it (None: the key is absent, generation 0)."""
    if reply is None:
        return 0
    text = reply.decode() if isinstance(reply, bytes) else str(reply)
    return int(text) if text.isascii() and text.isdigit() else 0
