"""The Redis side shared by the admin service and the workers.

What both sides do to the data plane lives here once: the registered Lua scripts
(``scripts``), the catalog projection (topics, namespaces, subscriptions' consumer groups:
``catalog``) and the reader of the change-event stream (``events``).  This package imports
``models`` and redis only; ``api`` and ``workers`` import it, never the other way round.
"""
