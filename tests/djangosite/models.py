"""A model whose cached copy is kept right by the delayed double delete (docs/django.md,
"Keeping cached rows right"): after each committed save or delete of a product, its
cache entry is deleted, and deleted again `AGAIN_AFTER` seconds later."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.db import models, transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

# Above the replicas' worst lag plus the slowest read-to-fill of a loader.
AGAIN_AFTER = 0.5


class Product(models.Model):
    name = models.CharField(max_length=100)
    price = models.IntegerField()

    class Meta:
        app_label = "djangosite"


def product_key(pk: Any) -> str:
    return f"product:{pk}"


def cached_product(pk: Any, using: str = "default") -> dict[str, Any]:
    """A product as the pages show it, read through the cache (read from `using`, a
    replica say, on a miss): one load across all processes."""

    def load() -> dict[str, Any]:
        row = Product.objects.using(using).get(pk=pk)
        return {"name": row.name, "price": row.price}

    found: dict[str, Any] = cache.get_or_set(product_key(pk), load, timeout=300)
    return found


@receiver(post_save, sender=Product)
@receiver(post_delete, sender=Product)
def forget_product(sender: Any, instance: Product, **kwargs: Any) -> None:
    # After COMMIT: deleted before it, a reader could fill the cache with the old row
    # again before the new one is visible.
    key = product_key(instance.pk)
    transaction.on_commit(lambda: cache.delete(key, again_after=AGAIN_AFTER))
