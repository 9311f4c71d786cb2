"""The wire protocol shared by the client and the server.

Clients and workers talk only through Redis; this package is everything both sides must agree
on, and nothing else: the key layout (``keys``), names of topics and partitions (``names``),
the Lua scripts (``lua``) with their registry (``scripts``: KEYS, ARGV and who may call each),
their frames, packets and wake-up messages (``frames``), the
errors a name check raises (``errors``) and URL redaction for logs (``urls``).  It depends on
the standard library, ``msgpack`` and nothing of the server.
"""
