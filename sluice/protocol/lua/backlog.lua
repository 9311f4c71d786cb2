-- backlog: a group's undelivered entries when Redis knows them, else where to count them.
-- KEYS[1] stream (the partition's; its level streams too, lib/levels.lua)
-- ARGV[1] subscription (group)
-- Redis answers a group's lag from its entries-read counter, which is unknown after a group
-- was created or moved at an explicit id.  Counting the entries after the group's
-- last-delivered id is the caller's work, in bounded calls (count_entries.lua) up to the
-- stream's last id as of this call; backlog_set.lua then stores the result as the group's
-- entries-read, so XINFO GROUPS answers the lag from then on.  O(groups) per stream here.
-- A partition with level streams has the group on each: its backlog is the sum over every
-- stream of pending + lag, each stream's lag known or counted on its own.
-- Returns {0, lag, pending} (summed over every stream) when Redis knows the lag on each;
-- else {1, last-delivered id, entries added, last id, entries deleted so far, level, lag,
-- pending}: count the entries in (last-delivered id, last id] of that level's stream (4: the
-- partition's own), the first stream (highest level first) whose lag Redis does not know;
-- lag and pending summed over the streams whose lag it knows; then, for each further stream
-- whose lag it does not know, its five figures (last-delivered id, entries added, last id,
-- entries deleted, level) in the same order; {-1} when the group does not exist.
-- include lib/levels.lua
local call = redis.call
local lag, pending, unknown = 0, 0, {}
for _, stream in ipairs(streams_of(KEYS[1])) do
  local found = false
  for _, info in ipairs(call('XINFO', 'GROUPS', stream)) do
    local fields = {}
    for i = 1, #info, 2 do fields[info[i]] = info[i + 1] end
    if fields['name'] == ARGV[1] then
      found = true
      if type(fields['lag']) == 'number' then
        lag, pending = lag + fields['lag'], pending + fields['pending']
      else
        local s = {}
        local got = call('XINFO', 'STREAM', stream)
        for i = 1, #got, 2 do s[got[i]] = got[i + 1] end
        -- A level stream's name ends in ":<level>", the log's in "log" (level 4).
        local level = tonumber(string.match(stream, ':(%d)$')) or 4
        unknown[#unknown + 1] = {fields['last-delivered-id'], s['entries-added'],
          s['last-generated-id'], s['entries-added'] - s['length'], level}
      end
    end
  end
  if not found and stream == KEYS[1] then return {-1} end
end
if #unknown == 0 then return {0, lag, pending} end
local out = {1}
for _, x in ipairs(unknown[1]) do out[#out + 1] = x end
out[#out + 1] = lag
out[#out + 1] = pending
for k = 2, #unknown do
  for _, x in ipairs(unknown[k]) do out[#out + 1] = x end
end
return out
