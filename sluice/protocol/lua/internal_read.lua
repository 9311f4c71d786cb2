-- internal_read: one atomic reading of a partition's storage for internalStats: the stream,
-- every consumer group with its pending summary, consumers and scheduled redeliveries, and the
-- lease, all as of the same moment (a dispatch between two reads would otherwise show a
-- cursor older than the pending entries it handed out).
-- KEYS[1] the partition's log (stream), KEYS[2] its lease.
-- ARGV[1] the key prefix of the partition's subscriptions ("sl:{P}:s:"); a subscription's
-- redelivery schedule is ARGV[1] .. name .. ":redeliver" (the partition's slot).
-- Returns {XINFO STREAM (flat; false without a stream), lease token (false when none),
-- then per group {XINFO GROUPS entry (flat), XPENDING summary, XINFO CONSUMERS, ZCARD}}.
-- A partition with level streams (lib/levels.lua) reads as one stream: the XINFO STREAM
-- figures length and entries-added are summed over every stream, first-entry is the earliest
-- of their first entries, last-entry and last-generated-id the latest; each group's pending,
-- entries-read and lag are summed and its last-delivered-id is the latest
-- (lib/level_merge.lua's group_totals), its XPENDING summary is over every stream
-- (pending_totals), and its consumers' pending entries are summed over every stream (idle
-- and inactive: the least of them).  The groups are those of the log.
-- include lib/levels.lua
-- include lib/level_merge.lua
local stream = redis.pcall('XINFO', 'STREAM', KEYS[1])
if type(stream) ~= 'table' or stream.err then stream = false end
local levels = side_levels(KEYS[1])
-- Level streams: their figures into the log's (or, when the log has no stream yet, into the
-- first level stream's).
for _, level in ipairs(levels) do
  local side = redis.call('XINFO', 'STREAM', level_stream(KEYS[1], level))
  if not stream then
    stream = side
  else
    local at, other = {}, fields_of(side)
    for i = 1, #stream, 2 do at[stream[i]] = i + 1 end
    stream[at['length']] = stream[at['length']] + other['length']
    stream[at['entries-added']] = stream[at['entries-added']] + other['entries-added']
    if id_before(stream[at['last-generated-id']], other['last-generated-id']) then
      stream[at['last-generated-id']] = other['last-generated-id']
    end
    local first, last = stream[at['first-entry']], stream[at['last-entry']]
    if other['first-entry'] and (not first or id_before(other['first-entry'][1], first[1])) then
      stream[at['first-entry']] = other['first-entry']
    end
    if other['last-entry'] and (not last or id_before(last[1], other['last-entry'][1])) then
      stream[at['last-entry']] = other['last-entry']
    end
  end
end
local out = {stream, redis.call('GET', KEYS[2])}
local groups = {}
if stream then groups = group_totals(KEYS[1]) end
-- XINFO CONSUMERS of a group over every stream: each consumer once, its pending summed.
local function consumers_of(name)
  local list = redis.call('XINFO', 'CONSUMERS', KEYS[1], name)
  if #levels == 0 then return list end
  local at = {}
  for k, c in ipairs(list) do at[fields_of(c)['name']] = k end
  for _, level in ipairs(levels) do
    for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', level_stream(KEYS[1], level), name)) do
      local other = fields_of(c)
      local k = at[other['name']]
      if not k then
        list[#list + 1] = c
        at[other['name']] = #list
      else
        local mine = list[k]
        for i = 1, #mine, 2 do
          local field, value = mine[i], other[mine[i]]
          if field == 'pending' then
            mine[i + 1] = mine[i + 1] + value
          elseif (field == 'idle' or field == 'inactive') and type(value) == 'number'
              and value >= 0 and (mine[i + 1] < 0 or value < mine[i + 1]) then
            mine[i + 1] = value
          end
        end
      end
    end
  end
  return list
end
for i = 1, #groups do
  local group = groups[i]
  local name
  for j = 1, #group, 2 do
    if group[j] == 'name' then name = group[j + 1] end
  end
  out[#out + 1] = {
    group,
    pending_totals(KEYS[1], name),
    consumers_of(name),
    redis.call('ZCARD', ARGV[1] .. name .. ':redeliver'),
  }
end
return out
