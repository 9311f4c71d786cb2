-- stream_ids (a piece of backlog_set.lua, produce.lua, reset_cursor.lua and
-- lib/level_merge.lua, spliced in by sluice.protocol.scripts): stream entry ids "<ms>-<seq>"
-- in stream order.  id_parts gives the two numbers of an id, id_before whether id a comes
-- before id b.
local function id_parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms), tonumber(seq)
end
local function id_before(a, b)
  local ams, aseq = id_parts(a)
  local bms, bseq = id_parts(b)
  return ams < bms or (ams == bms and aseq < bseq)
end
