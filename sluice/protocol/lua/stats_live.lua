-- stats_live: one atomic reading of a partition's counters, its consumer groups and these
-- subscriptions' counters, for the admin service's stats answer (every counter as current
-- as the backlog it reads in the same call).
-- KEYS[1] the partition's stats hash, KEYS[2] its log (stream); then KEYS[2+i] the stats
-- hash of subscription i (its name ARGV[i]).
-- Returns {partition stats (flat HGETALL), XINFO GROUPS of the log ({} when it has none),
-- then per subscription its stats (flat HGETALL) followed by the pair "msg_delayed" N: the
-- entries held for their delivery time (its "delayed" zset, next to the stats hash) that are
-- still scheduled (its "redeliver" zset), i.e. not handed on, skipped or cleared: msgDelayed}.
local groups = redis.pcall('XINFO', 'GROUPS', KEYS[2])
if type(groups) ~= 'table' or groups.err then groups = {} end
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
