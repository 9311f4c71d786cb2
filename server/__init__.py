"""Sluice's server launchers: the ``sluice`` command and what it starts.

``sluice standalone|api|worker|migrate|tokens`` (``server.cli``) runs the admin service
(``api``), the broker workers (``workers``) and the migrations; the embedded PostgreSQL and
Redis servers and the port checks used by standalone mode and the tests live here too.  The
client package ``sluice`` never imports this package; this package needs the ``server`` extra
(``pip install 'sluice-dispatch[server]'``).
"""
