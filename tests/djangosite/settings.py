"""Settings of the test project: seawall.django's cache (with an L1) and sessions."""

from __future__ import annotations

import os

SECRET_KEY = "seawall-tests"
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "djangosite.urls"
WSGI_APPLICATION = "djangosite.wsgi.application"
USE_TZ = True
INSTALLED_APPS = ["seawall.django", "djangosite"]
MIDDLEWARE = ["django.contrib.sessions.middleware.SessionMiddleware"]
CACHES = {
    "default": {
        "BACKEND": "seawall.django.RedisCache",
        "LOCATION": os.environ["DJANGOSITE_REDIS_URL"],
        "OPTIONS": {"l1_size": 1000, "l1_ttl": 5.0},
    }
}
SESSION_ENGINE = "seawall.django.sessions"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("DJANGOSITE_DB", ":memory:"),
    }
}
if os.environ.get("DJANGOSITE_REPLICA_DB"):
    # A replica the tests update by hand, late: its lag is theirs to choose.
    DATABASES["replica"] = {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["DJANGOSITE_REPLICA_DB"],
    }
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
