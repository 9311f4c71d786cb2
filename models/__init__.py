"""Sluice's core: ORM tables and the pure policy domain.

The admin service (``api``), the broker workers (``workers``), the shared Redis side
(``dataplane``), the report jobs (``reports``) and the launchers (``server``) depend on this
package; it depends on none of them, only on the wire protocol (``sluice.protocol``), and not
on FastAPI, Redis, Celery or Spark.  The client (``sluice``) does not import it.
"""
