"""Sluice's core: ORM tables and the pure policy domain.

Everything else (the admin service in ``api``, the broker workers in ``workers``, the report
jobs in ``reports`` and the public ``sluice`` package) depends on this package; it depends on
none of them, nor on FastAPI, Redis, Celery or Spark.
"""
