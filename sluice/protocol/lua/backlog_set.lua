-- backlog_set: store a group's entries-read counter from a count made in bounded calls, and
-- answer its lag; atomic, so produce, dispatch and acks around it cannot make it wrong.
-- KEYS[1] stream (the partition's; with ARGV[6], one of its level streams, lib/levels.lua)
-- ARGV[1] subscription (group)
-- ARGV[2] reference id R, ARGV[3] entries added up to and including R (the caller counted
--         the entries after R: entries added then, less those)
-- ARGV[4] most entries to count in this call
-- ARGV[5] entries deleted from the stream (trimmed) when the count began
-- ARGV[6] (optional) the level whose stream was counted (backlog.lua names it; default 4,
--         the partition's own stream): everything here is about that stream only
-- Entries-added up to an id does not change when the stream grows, so the count stays true
-- while the group moves; but entries trimmed since the count began may be among those it
-- still had to count (a group that moved on and acknowledged them), so then it starts over.
-- When the group is still at R, R's counter is stored.  When it moved on (a dispatch
-- meanwhile), the entries in (R, its id] are counted here, at most ARGV[4].
-- Returns {0, lag, pending entries} when stored (or when Redis knows the lag meanwhile), of
-- that one stream (the caller adds the other streams' figures, backlog.lua's); {1, id,
-- entries added up to id} when the group is further than ARGV[4] entries on: call again from
-- there; {2} when the group moved back or entries were trimmed meanwhile (count again from the
-- start); {-1} when it does not exist.
-- include lib/levels.lua
local call = redis.call
local stream = level_stream(KEYS[1], tonumber(ARGV[6] or '4'))
local group, ref, read, most = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local last, pending = nil, 0
for _, info in ipairs(call('XINFO', 'GROUPS', stream)) do
  local fields = {}
  for i = 1, #info, 2 do fields[info[i]] = info[i + 1] end
  if fields['name'] == group then
    pending = fields['pending']
    if type(fields['lag']) == 'number' then return {0, fields['lag'], pending} end
    last = fields['last-delivered-id']
  end
end
if not last then return {-1} end
local info = call('XINFO', 'STREAM', stream)
local s = {}
for i = 1, #info, 2 do s[info[i]] = info[i + 1] end
if s['entries-added'] - s['length'] ~= tonumber(ARGV[5]) then return {2} end
-- include lib/stream_ids.lua
if id_before(last, ref) then return {2} end
if last ~= ref then
  local got = call('XRANGE', stream, '(' .. ref, last, 'COUNT', most)
  if #got == most and got[#got][1] ~= last then
    return {1, got[#got][1], read + #got}
  end
  read = read + #got
end
call('XGROUP', 'SETID', stream, group, last, 'ENTRIESREAD', read)
return {0, s['entries-added'] - read, pending}
