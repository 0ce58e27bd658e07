"""SW012: a redis client (or pool) built per request or per loop iteration."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from seawall.lint._context import FileContext
from seawall.lint._model import rule
from seawall.lint._names import Constructor

# Decorators that make a function run once per request, message or job: web routes
# (Flask, FastAPI, Starlette, Pyramid, Django REST framework) and task queues (Celery,
# Dramatiq, RQ, arq, huey).
_PER_CALL_DECORATORS = frozenset(
    {
        "route",
        "get",
        "post",
        "put",
        "patch",
        "delete",
        "websocket",
        "api_view",
        "view_config",
        "task",
        "shared_task",
        "actor",
        "job",
        "periodic_task",
        "middleware",
    }
)
# Methods of view, handler and consumer classes, run once per request or message.
_HANDLER_METHODS = frozenset(
    {"get", "post", "put", "patch", "delete", "dispatch", "handle", "__call__", "receive"}
)
_HANDLER_CLASSES = ("View", "Handler", "Resource", "Middleware", "Consumer", "ViewSet")
# Decorators that build the value once and keep it: a client made there is shared.
_CACHING_DECORATORS = frozenset({"lru_cache", "cache", "cached_property", "cached"})


def _decorator_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = set()
    for decorator in function.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute):
            names.add(target.attr)
        elif isinstance(target, ast.Name):
            names.add(target.id)
    return names


def _per_call(ctx: FileContext, function: ast.AST) -> str | None:
    """What runs `function` once per event ("request handler", "task"), or None."""
    if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    decorators = _decorator_names(function)
    if decorators & _CACHING_DECORATORS:
        return None
    if decorators & _PER_CALL_DECORATORS:
        return f"{function.name}(), which runs once per request or job"
    owner = ctx.inference.method_class.get(function)
    if (
        owner is not None
        and function.name in _HANDLER_METHODS
        and owner.name.endswith(_HANDLER_CLASSES)
    ):
        return f"{owner.name}.{function.name}(), which runs once per request"
    return None


def _kept(ctx: FileContext, node: ast.Call) -> bool:
    """Stored for later calls: `self._client = Redis(...)`, a global, an element of a
    collection (`[Redis(u) for u in urls]`, `clients.append(Redis(u))`), a returned value
    (a factory the caller may keep), or a client sharing a given pool."""
    if any(k.arg == "connection_pool" for k in node.keywords):
        return True
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "from_pool":
        return True
    parent = ctx.parents.get(node)
    if isinstance(parent, ast.keyword) and parent.arg == "connection_pool":
        return True  # Redis(connection_pool=ConnectionPool(...)): the client is judged
    if isinstance(parent, ast.Return | ast.List | ast.Tuple | ast.Set | ast.Dict):
        return True
    if isinstance(parent, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        return True  # [Redis(url) for url in urls]: one client per server, collected
    if (
        isinstance(parent, ast.Call)
        and isinstance(parent.func, ast.Attribute)
        and parent.func.attr in ("append", "add", "insert", "setdefault", "appendleft")
    ):
        return True
    if isinstance(parent, ast.Assign | ast.AnnAssign):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        if any(isinstance(t, ast.Attribute | ast.Subscript) for t in targets):
            return True
        scope = ctx.scope_of(node)
        declared = {
            name
            for statement in ast.walk(scope)
            if isinstance(statement, ast.Global | ast.Nonlocal)
            for name in statement.names
        }
        if any(isinstance(t, ast.Name) and t.id in declared for t in targets):
            return True
    return False


def _escapes(ctx: FileContext, node: ast.Call, loop: ast.AST) -> bool:
    """Whether the client a loop builds into a local name outlives the iteration: the
    name is passed on (`servers.add((client, weight))`, `Node(client)`) rather than only
    used for its own commands (`client.ping()`)."""
    parent = ctx.parents.get(node)
    while isinstance(parent, ast.Await):
        parent = ctx.parents.get(parent)
    if not isinstance(parent, ast.Assign | ast.AnnAssign):
        return False
    targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
    names = {t.id for t in targets if isinstance(t, ast.Name)}
    return any(
        isinstance(child, ast.Name)
        and child.id in names
        and isinstance(child.ctx, ast.Load)
        and not isinstance(ctx.parents.get(child), ast.Attribute)
        for child in ast.walk(loop)
    )


@rule("SW012", "client-per-call")
def check(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """A redis client owns a connection pool. Built inside a request handler, a task or a
    loop, each one opens new TCP connections (with the AUTH, HELLO and TLS handshakes
    they need) for a handful of commands, then leaves them open until the garbage
    collector closes them: latency on every call, and under load thousands of
    connections that exhaust the server's maxclients and the host's ports. Alibaba's
    guidelines (seed 002) ask for a shared connection pool.

    Fix: build one client (or `ConnectionPool`) at start-up, at module level or in the
    application's factory, and share it; a client per call may wrap a shared pool with
    `Redis(connection_pool=pool)` or `Redis.from_pool(pool)`. Reported at a client or pool
    constructor inside a loop, or directly inside a web route, a view or handler method,
    or a task (a decorator such as `@app.get`, `@app.route`, `@shared_task`, `@actor`),
    unless it is stored on an attribute, a global or a collection, returned, or wraps a
    given pool. Known false positives: a loop that builds one client per configured
    server once, then uses and drops each.
    """
    for node in ctx.nodes:
        if not isinstance(node, ast.Call):
            continue
        built = ctx.inference.constructor(node)
        if built is None or _kept(ctx, node):
            continue
        what = "connection pool" if built is Constructor.POOL else "redis client"
        loops = list(ctx.enclosing_loops(node))
        if loops:
            if _escapes(ctx, node, loops[0]):
                continue  # kept beyond the iteration: one client per server, built once
            where = "in a loop, once per iteration"
        else:
            handler = _per_call(ctx, ctx.scope_of(node))
            if handler is None:
                continue
            where = f"in {handler}"
        yield (
            node,
            (
                f"{what} built {where}: each one opens new connections and handshakes and "
                "leaves them to the garbage collector; build one at start-up and share it "
                "(or pass connection_pool= a shared pool)"
            ),
        )
