"""INSTALLED_APPS = [..., "seawall.django"]: registers seawall's system checks."""

from __future__ import annotations

from django.apps import AppConfig


class SeawallConfig(AppConfig):
    name = "seawall.django"
    # "django" (the last part of the name, Django's default label) is taken by nothing
    # but would read as Django's own in messages and migrations.
    label = "seawall"
    verbose_name = "seawall"

    def ready(self) -> None:
        from seawall.django import checks  # noqa: F401 - registers them
