"""seawall.aio.Stock: flash-sale inventory that never oversells and never takes twice."""

from __future__ import annotations

from typing import Any

from seawall.metrics._families import STOCK_TAKES
from seawall.metrics._sink import SINK as metrics_sink
from seawall.shared import _scripts
from seawall.shared._async.scripts import run_script
from seawall.shared._keys import StockKeys, stock_keys
from seawall.shared._validate import check_async_client, check_name
from seawall.stock import _stock

_TAKE = _scripts.load("seawall.stock", "stock_take")
_CANCEL = _scripts.load("seawall.stock", "stock_cancel")
_PUT = _scripts.load("seawall.stock", "stock_put")


class AsyncStock:
    """Units of one product on sale, shared by every process that sells it.

    Each take is one script that checks the units available, takes them, records the
    order id and logs the take to a Redis Stream (`keys.log`), so a retried order never
    takes twice and a consumer can save every order to SQL. All keys of one stock share a
    hash tag: the scripts run on Redis Cluster.
    """

    def __init__(self, client: Any, name: str) -> None:
        self._client = check_async_client(client, "Stock")
        self.name = check_name(name, "Stock")
        self.keys: StockKeys = stock_keys(name)
        keys = self.keys
        self._take_keys = (keys.avail, keys.taken, keys.orders, keys.log, keys.onsale)
        self._cancel_keys = (keys.avail, keys.taken, keys.orders, keys.log)
        self._put_keys = (keys.onsale, keys.avail, keys.taken, keys.orders)

    def __repr__(self) -> str:
        return f"<seawall.Stock {self.name!r}>"

    async def put(self, units: int, *, recount: bool = False) -> None:
        """Put `units` on sale in total; available becomes `units` minus the units taken.

        Raises StockQuantityError (nothing changed) when orders already took more, and
        StockCounterLostError (nothing changed) when the `taken` counter is gone while
        orders are recorded (Redis lost it). `recount=True` recounts the units taken from
        the orders hash instead of trusting the counter: the recovery after such a loss
        (it reads every order, so it is not for every put).
        """
        units = _stock.check_units(units, self.name)
        args = (units, 1 if recount else 0)
        reply = await run_script(self._client, _PUT, self._put_keys, args)
        _stock.put_outcome(reply, self.name, units)

    async def take(self, order_id: str | int, qty: int = 1) -> bool:
        """Take `qty` units for `order_id`: True when the order holds them, False if not.

        Retrying an order is safe: a retry of a take that succeeded returns True without
        taking again; a cancelled order returns False and never takes again; an order that
        found too few units took nothing and may succeed later. Raises
        StockQuantityError when `qty` exceeds the units on sale in total, and
        OrderConflictError when the order took a different qty before (nothing changed).
        """
        order = _stock.check_order_id(order_id, self.name)
        qty = _stock.check_qty(qty, self.name)
        reply = await run_script(self._client, _TAKE, self._take_keys, (order, qty))
        taken = _stock.take_outcome(reply, self.name, order, qty)
        metrics_sink.count(STOCK_TAKES.name, (self.name, "taken" if taken else "refused"))
        return taken

    async def cancel(self, order_id: str | int) -> bool:
        """Give back exactly what `order_id` took: True once; False for an unknown order or
        one cancelled before. A cancelled order cannot take again."""
        order = _stock.check_order_id(order_id, self.name)
        reply = await run_script(self._client, _CANCEL, self._cancel_keys, (order,))
        return _stock.cancel_outcome(reply, self.name)

    async def available(self) -> int:
        """Units available now (0 before the first put)."""
        return _stock.count(await self._client.get(self.keys.avail))

    async def taken(self) -> int:
        """Units held by orders now: taken and not cancelled."""
        return _stock.count(await self._client.get(self.keys.taken))

    async def order(self, order_id: str | int) -> int | None:
        """The units `order_id` holds; None if it never took or was cancelled."""
        order = _stock.check_order_id(order_id, self.name)
        return _stock.order_qty(await self._client.hget(self.keys.orders, order))
