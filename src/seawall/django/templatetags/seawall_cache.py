"""`{% load seawall_cache %}`: Django's `{% cache %}` tag, rendering an expired fragment
once per expiry across all processes.

    {% load seawall_cache %}
    {% cache 500 sidebar request.user.username %} ... {% endcache %}

Same syntax, keys and cache choice as Django's tag (`template_fragments` if that cache
exists, else `default`; `using="name"`). Django's tag reads the fragment with get() and
stores it with set(), so every request that misses an expired fragment renders it; this
one asks get_or_set(), which on seawall.django.RedisCache renders it once while the
other requests, in every process, wait for it. (On another backend it behaves as
Django's tag.)
"""

from __future__ import annotations

from typing import Any

from django.core.cache import InvalidCacheBackendError, caches
from django.core.cache.utils import make_template_fragment_key
from django.template import Context, Library, TemplateSyntaxError, VariableDoesNotExist
from django.templatetags import cache as django_cache_tag

register = Library()


def _resolve(variable: Any, context: Context, what: str) -> Any:
    try:
        return variable.resolve(context)
    except VariableDoesNotExist:
        raise TemplateSyntaxError(
            f"cache tag: unknown variable {variable.var!r} ({what})"
        ) from None


class CacheNode(django_cache_tag.CacheNode):
    """Django's node, rendered through get_or_set."""

    def render(self, context: Context) -> str:
        expire_time = _resolve(self.expire_time_var, context, "the timeout")
        if expire_time is not None:
            try:
                expire_time = int(expire_time)
            except (TypeError, ValueError):
                raise TemplateSyntaxError(
                    f"cache tag: the timeout must be an integer, got {expire_time!r}"
                ) from None
        if self.cache_name:
            name = _resolve(self.cache_name, context, "using=")
            try:
                cache = caches[name]
            except InvalidCacheBackendError:
                raise TemplateSyntaxError(f"cache tag: no cache named {name!r}") from None
        elif "template_fragments" in caches.settings:
            cache = caches["template_fragments"]
        else:
            cache = caches["default"]
        vary_on = [variable.resolve(context) for variable in self.vary_on]
        key = make_template_fragment_key(self.fragment_name, vary_on)
        rendered: str = cache.get_or_set(key, lambda: self.nodelist.render(context), expire_time)
        return rendered


@register.tag("cache")
def do_cache(parser: Any, token: Any) -> CacheNode:
    """Parsed by Django's own tag (same syntax and errors); rendered by the node above."""
    node = django_cache_tag.do_cache(parser, token)
    return CacheNode(
        node.nodelist, node.expire_time_var, node.fragment_name, node.vary_on, node.cache_name
    )
