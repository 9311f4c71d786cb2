"""The data plane's Lua scripts (package data, registered by ``sluice.protocol.scripts``)."""
