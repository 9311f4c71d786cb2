"""The one path every stored policy takes: find its target, store or remove it with an audit
entry and a change event, and answer a dry run.

Every policy kind (``api.limits``), permissions (``api.permissions``) and dynamic broker
settings (``api.brokers``) go through it; a new kind of policy declares its ORM row (``Stored``),
where a value lives (a ``Slot``) and, for a dry run, which topics to report.
"""
