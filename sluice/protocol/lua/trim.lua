-- trim: delete the entries of a partition that every subscription has acknowledged and that
-- are older than the retention grace, in one atomic call: a subscription created or a cursor
-- moved while the worker decides cannot lose entries to the trim.
-- KEYS[1] stream, KEYS[2] partition lease
-- ARGV[1] floor ms: entries of this millisecond and later stay (now less the grace period)
-- ARGV[2] fencing token: the lease must hold it ("" = no ownership check)
-- Every consumer group keeps its oldest pending entry, or else everything after its
-- last-delivered id, from the start of that id's millisecond (the trim goes by milliseconds).
-- A partition with level streams (lib/levels.lua) has its groups on each: every stream is
-- trimmed by this rule on its own, by its groups' positions there.
-- The trim is approximate (whole stream nodes), so it costs O(groups) per stream plus freeing
-- the nodes.
-- Returns the number of entries deleted (over every stream), or the error "FENCED".
local call = redis.call
if ARGV[2] ~= '' and call('GET', KEYS[2]) ~= ARGV[2] then
  return redis.error_reply('FENCED partition lease lost')
end
-- include lib/levels.lua
local function ms(id) return tonumber(string.match(id, '^(%d+)')) end
local function trim(stream)
  if call('EXISTS', stream) == 0 then return 0 end  -- no stream yet: nothing to trim
  local floor = tonumber(ARGV[1])
  for _, info in ipairs(call('XINFO', 'GROUPS', stream)) do
    local fields = {}
    for i = 1, #info, 2 do fields[info[i]] = info[i + 1] end
    local keep = fields['last-delivered-id']
    if fields['pending'] > 0 then keep = call('XPENDING', stream, fields['name'])[2] end
    floor = math.min(floor, ms(keep))
  end
  if floor <= 0 then return 0 end
  return call('XTRIM', stream, 'MINID', '~', floor .. '-0')
end
local deleted = 0
for _, stream in ipairs(streams_of(KEYS[1])) do deleted = deleted + trim(stream) end
return deleted
