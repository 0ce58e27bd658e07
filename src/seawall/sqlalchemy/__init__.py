"""seawall.sqlalchemy: a query and entity cache for SQLAlchemy 2, invalidated on COMMIT.

    from seawall.sqlalchemy import QueryCache, cached

    QueryCache(r, "shop").attach(Session)
    session.execute(select(User).where(User.id == 1).options(cached()))
    session.get(User, 1, options=[cached()])

See docs/sqlalchemy.md. Needs the `seawall[sqlalchemy]` extra.
"""

from __future__ import annotations

try:
    import sqlalchemy
except ImportError:  # pragma: no cover - depends on the environment
    raise ImportError(
        "seawall.sqlalchemy needs SQLAlchemy 2: pip install 'seawall[sqlalchemy]'"
    ) from None

if int(sqlalchemy.__version__.split(".")[0]) < 2:  # pragma: no cover
    raise ImportError(
        f"seawall.sqlalchemy needs SQLAlchemy >= 2, found {sqlalchemy.__version__}: "
        "pip install 'seawall[sqlalchemy]'"
    )

from seawall.sqlalchemy._faces import AsyncQueryCache, QueryCache
from seawall.sqlalchemy._option import cached

__all__ = ["AsyncQueryCache", "QueryCache", "cached"]
