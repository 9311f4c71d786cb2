-- count_entries: count a stream's entries after an id, at most a given number of them (the
-- admin service counts a long range in many short calls before a reset_cursor call; stats
-- count a backlog whose lag Redis cannot tell the same way, before a backlog_set call).
-- KEYS[1] stream
-- ARGV[1] id: count the entries after it, ARGV[2] most entries to count in this call,
-- ARGV[3] (optional) the last id to count (default: the end of the stream)
-- Returns {entries counted, id of the last one ("" when none)}.
local found = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1], ARGV[3] or '+', 'COUNT',
  tonumber(ARGV[2]))
if #found == 0 then return {0, ''} end
return {#found, found[#found][1]}
