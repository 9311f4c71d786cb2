-- backlog: a group's undelivered entries when Redis knows them, else where to count them.
-- KEYS[1] stream
-- ARGV[1] subscription (group)
-- Redis answers a group's lag from its entries-read counter, which is unknown after a group
-- was created or moved at an explicit id.  Counting the entries after the group's
-- last-delivered id is the caller's work, in bounded calls (count_entries.lua) up to the
-- stream's last id as of this call; backlog_set.lua then stores the result as the group's
-- entries-read, so XINFO GROUPS answers the lag from then on.  O(groups) here.
-- Returns {0, lag, pending} when Redis knows the lag; {1, last-delivered id, entries added,
-- last id, entries deleted so far} to count the entries in (last-delivered id, last id];
-- {-1} when the group does not exist.
local call = redis.call
for _, info in ipairs(call('XINFO', 'GROUPS', KEYS[1])) do
  local fields = {}
  for i = 1, #info, 2 do fields[info[i]] = info[i + 1] end
  if fields['name'] == ARGV[1] then
    if type(fields['lag']) == 'number' then return {0, fields['lag'], fields['pending']} end
    local stream = call('XINFO', 'STREAM', KEYS[1])
    local s = {}
    for i = 1, #stream, 2 do s[stream[i]] = stream[i + 1] end
    return {1, fields['last-delivered-id'], s['entries-added'], s['last-generated-id'],
      s['entries-added'] - s['length']}
  end
end
return {-1}
