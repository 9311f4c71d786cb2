-- stats_read: one atomic reading of a partition's counters and gauges for its stats document
-- (a worker's stats tick), in place of a pipeline of four commands per subscription.
-- KEYS[1] the partition's stats hash, KEYS[2] its log (stream); then per subscription i
-- (its name ARGV[i]): KEYS[3i] stats hash, KEYS[3i+1] permits hash, KEYS[3i+2] info hash.
-- Returns {partition stats (flat HGETALL), XINFO GROUPS of the log ({} when it has none),
-- then per subscription {stats (flat, followed by the pair "msg_delayed" N as stats_live.lua
-- counts it), XPENDING summary (false when the group is gone),
-- permits (flat), info (flat), entries waiting per priority 0..9 (false when none waits)}}.
-- Entries waiting per priority: without level streams, those in the subscription's priority
-- index (the lists "prio:<priority>" next to its stats hash, dispatch.lua's); with level
-- streams (lib/levels.lua), each level's backlog on that level's stream alone (4: the log):
-- its group's pending + lag there (the lag counted, at most LEVEL_COUNT_MOST, when Redis does
-- not know it), so the levels add up to the subscription's backlog.
-- With level streams the groups' pending and lag and the XPENDING summaries are summed over
-- every stream of the partition (lib/level_merge.lua: group_totals, pending_totals).
-- include lib/levels.lua
-- include lib/level_merge.lua
local LEVEL_COUNT_MOST = 10000
local groups, per_stream = group_totals(KEYS[2])
local out = {redis.call('HGETALL', KEYS[1]), groups}
-- A group's backlog on one stream: pending + lag.
local function level_backlog(stream, fields)
  local lag = fields['lag']
  if type(lag) ~= 'number' then
    lag = #redis.call('XRANGE', stream, '(' .. fields['last-delivered-id'], '+', 'COUNT',
      LEVEL_COUNT_MOST)
  end
  return fields['pending'] + lag
end
for i = 1, #ARGV do
  local base = 3 * i
  local pending = pending_totals(KEYS[2], ARGV[i])
  local levels, any = {}, false
  if #per_stream > 0 then
    for level = 0, 9 do levels[level + 1] = 0 end
    for _, entry in ipairs(per_stream) do
      local fields = entry[3][ARGV[i]]
      if fields then
        levels[entry[1] + 1] = level_backlog(entry[2], fields)
        if levels[entry[1] + 1] > 0 then any = true end
      end
    end
  else
    local prio = string.sub(KEYS[base], 1, -6) .. 'prio:'
    for level = 0, 9 do
      levels[level + 1] = redis.call('LLEN', prio .. level)
      if levels[level + 1] > 0 then any = true end
    end
  end
  if not any then levels = false end
  local stats = redis.call('HGETALL', KEYS[base])
  local held = string.sub(KEYS[base], 1, -6)
  stats[#stats + 1] = 'msg_delayed'
  stats[#stats + 1] = redis.call('ZCARD', held .. 'delayed') > 0
    and redis.call('ZINTERCARD', 2, held .. 'delayed', held .. 'redeliver') or 0
  out[#out + 1] = {
    stats,
    pending,
    redis.call('HGETALL', KEYS[base + 1]),
    redis.call('HGETALL', KEYS[base + 2]),
    levels,
  }
end
return out
