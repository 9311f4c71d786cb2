"""The data plane's Lua scripts (package data, read by ``sluice.protocol.frames``)."""
