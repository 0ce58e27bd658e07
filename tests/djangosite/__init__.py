"""A small Django project run by the end-to-end tests under gunicorn (two sync worker
processes), with seawall.django as its cache and session engine. Configured from the
environment: DJANGOSITE_REDIS_URL (required), DJANGOSITE_DB (an SQLite file) and
DJANGOSITE_REPLICA_DB (another, the "replica" database)."""
