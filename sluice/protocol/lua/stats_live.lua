-- stats_live: one atomic reading of a partition's counters, its consumer groups and these
-- subscriptions' counters, for the admin service's stats answer (every counter as current
-- as the backlog it reads in the same call).
-- KEYS[1] the partition's stats hash, KEYS[2] its log (stream); then KEYS[2+i] the stats
-- hash of subscription i (its name ARGV[i]).
-- Returns {partition stats (flat HGETALL), XINFO GROUPS of the log ({} when it has none),
-- each group's pending and lag summed over every stream of the partition when it has level
-- streams (lib/level_merge.lua's group_totals: lag false when Redis does not know it on one),
-- then per subscription its stats (flat HGETALL) followed by the pair "msg_delayed" N: the
-- entries held for their delivery time (its "delayed" zset, next to the stats hash) that are
-- still scheduled (its "redeliver" zset), i.e. not handed on, skipped or cleared: msgDelayed}.
-- include lib/levels.lua
-- include lib/level_merge.lua
local groups = group_totals(KEYS[2])
local out = {redis.call('HGETALL', KEYS[1]), groups}
for i = 1, #ARGV do
  local stats = redis.call('HGETALL', KEYS[2 + i])
  local prefix = string.sub(KEYS[2 + i], 1, -6)
  local delayed = 0
  if redis.call('ZCARD', prefix .. 'delayed') > 0 then
    delayed = redis.call('ZINTERCARD', 2, prefix .. 'delayed', prefix .. 'redeliver')
  end
  stats[#stats + 1] = 'msg_delayed'
  stats[#stats + 1] = delayed
  out[#out + 1] = stats
end
return out
