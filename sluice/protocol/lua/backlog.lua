-- backlog: count the entries a group has not been given yet, when Redis cannot tell.
-- KEYS[1] stream
-- ARGV[1] subscription (group)
-- Redis answers a group's lag from its entries-read counter, which is unknown after a group
-- was created or moved at an explicit id.  This counts the entries after the group's
-- last-delivered id (the work is proportional to that backlog, once) and stores the count
-- back as the group's entries-read, so XINFO GROUPS answers the lag from then on.
-- Returns the count, or -1 when the group does not exist.
local call = redis.call
local last = nil
for _, info in ipairs(call('XINFO', 'GROUPS', KEYS[1])) do
  local fields = {}
  for i = 1, #info, 2 do fields[info[i]] = info[i + 1] end
  if fields['name'] == ARGV[1] then
    if type(fields['lag']) == 'number' then return fields['lag'] end
    last = fields['last-delivered-id']
  end
end
if not last then return -1 end
local undelivered, from = 0, '(' .. last
while true do
  local entries = call('XRANGE', KEYS[1], from, '+', 'COUNT', 1000)
  undelivered = undelivered + #entries
  if #entries < 1000 then break end
  from = '(' .. entries[#entries][1]
end
local stream = call('XINFO', 'STREAM', KEYS[1])
local added = 0
for i = 1, #stream, 2 do
  if stream[i] == 'entries-added' then added = stream[i + 1] end
end
call('XGROUP', 'SETID', KEYS[1], ARGV[1], last, 'ENTRIESREAD', added - undelivered)
return undelivered
