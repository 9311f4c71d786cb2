-- entry_messages (a piece of reset_cursor.lua and skip.lua, spliced in by
-- sluice.protocol.scripts): the messages an entry holds, from its fields (a flat
-- field/value list): its 'n' field (a batch), else 1.
local function entry_messages(fields)
  for i = 1, #fields, 2 do
    if fields[i] == 'n' then return tonumber(fields[i + 1]) end
  end
  return 1
end
