-- count_entries: count a partition's entries after an id, at most a given number of them (the
-- admin service counts a long range in many short calls before a reset_cursor call; stats
-- count a backlog whose lag Redis cannot tell the same way, before a backlog_set call).
-- KEYS[1] stream (the partition's)
-- ARGV[1] id: count the entries after it, ARGV[2] most entries to count in this call,
-- ARGV[3] (optional) the last id to count (default, or "+": the end of the streams)
-- ARGV[4] (optional) a level: count in that level's stream only (4: the partition's own)
-- Without ARGV[4] the range applies to every stream of the partition (lib/levels.lua: ids of
-- all of them sort together), counted in id order across them, so the last id counted is
-- where the next call goes on.
-- Returns {entries counted, id of the last one ("" when none)}.
-- include lib/levels.lua
-- include lib/level_merge.lua
local streams = streams_of(KEYS[1])
if ARGV[4] then streams = {level_stream(KEYS[1], tonumber(ARGV[4]))} end
local upper, most = ARGV[3] or '+', tonumber(ARGV[2])
local fetches = {}
for k, stream in ipairs(streams) do
  fetches[k] = function(after, count)
    return redis.call('XRANGE', stream, '(' .. (after or ARGV[1]), upper, 'COUNT', count)
  end
end
local counted, last = merge_walk(fetches, most, false, most)
if counted == 0 then return {0, ''} end
return {counted, last[1]}
