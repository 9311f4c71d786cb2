-- trim: delete the entries of a partition that every subscription has acknowledged and that
-- are older than the retention grace, in one atomic call: a subscription created or a cursor
-- moved while the worker decides cannot lose entries to the trim.
-- KEYS[1] stream, KEYS[2] partition lease
-- ARGV[1] floor ms: entries of this millisecond and later stay (now less the grace period)
-- ARGV[2] fencing token: the lease must hold it ("" = no ownership check)
-- Every consumer group keeps its oldest pending entry, or else everything after its
-- last-delivered id, from the start of that id's millisecond (the trim goes by milliseconds).
-- The trim is approximate (whole stream nodes), so it costs O(groups) plus freeing the nodes.
-- Returns the number of entries deleted, or the error "FENCED".
local call = redis.call
if ARGV[2] ~= '' and call('GET', KEYS[2]) ~= ARGV[2] then
  return redis.error_reply('FENCED partition lease lost')
end
if call('EXISTS', KEYS[1]) == 0 then return 0 end  -- no stream yet: nothing to trim
local function ms(id) return tonumber(string.match(id, '^(%d+)')) end
local floor = tonumber(ARGV[1])
for _, info in ipairs(call('XINFO', 'GROUPS', KEYS[1])) do
  local fields = {}
  for i = 1, #info, 2 do fields[info[i]] = info[i + 1] end
  local keep = fields['last-delivered-id']
  if fields['pending'] > 0 then keep = call('XPENDING', KEYS[1], fields['name'])[2] end
  floor = math.min(floor, ms(keep))
end
if floor <= 0 then return 0 end
return call('XTRIM', KEYS[1], 'MINID', '~', floor .. '-0')
