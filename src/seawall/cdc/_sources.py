"""SOURCE_URL -> Source, by scheme; each source's module is imported only when used, so a
missing extra breaks only its own scheme, with the install command in the error."""

from __future__ import annotations

import importlib
from urllib.parse import urlsplit

from seawall.cdc._events import Source, SourceError

__all__ = ["open_source"]

# scheme -> (module, extra)
_SOURCES = {
    "postgresql": ("seawall.cdc.postgresql", "cdc-postgresql"),
    "postgres": ("seawall.cdc.postgresql", "cdc-postgresql"),
    "mysql": ("seawall.cdc.mariadb", "cdc-mysql"),
    "mariadb": ("seawall.cdc.mariadb", "cdc-mysql"),
}


def open_source(url: str) -> Source:
    """The Source for `url` (not opened yet); SourceError for an unknown scheme."""
    # SQLAlchemy's dialect+driver form (postgresql+psycopg://, mysql+pymysql://) names
    # the same server: an application's DATABASE_URL can be followed as it is.
    scheme = urlsplit(url).scheme.lower().partition("+")[0]
    entry = _SOURCES.get(scheme)
    if entry is None:
        known = ", ".join(f"{s}://" for s in _SOURCES)
        raise SourceError(f"cannot follow {url!r}: the URL must start with one of {known}")
    module_name, extra = entry
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SourceError(
            f"following {scheme}:// needs an extra ({exc}): pip install 'seawall[{extra}]'"
        ) from None
    source: Source = module.source_from_url(url)
    return source
