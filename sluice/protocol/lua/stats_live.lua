-- stats_live: one atomic reading of a partition's counters, its consumer groups and these
-- subscriptions' counters, for the admin service's stats answer (every counter as current
-- as the backlog it reads in the same call).
-- KEYS[1] the partition's stats hash, KEYS[2] its log (stream); then KEYS[2+i] the stats
-- hash of subscription i (its name ARGV[i]).
-- Returns {partition stats (flat HGETALL), XINFO GROUPS of the log ({} when it has none),
-- then per subscription its stats (flat HGETALL)}.
local groups = redis.pcall('XINFO', 'GROUPS', KEYS[2])
if type(groups) ~= 'table' or groups.err then groups = {} end
local out = {redis.call('HGETALL', KEYS[1]), groups}
for i = 1, #ARGV do
  out[#out + 1] = redis.call('HGETALL', KEYS[2 + i])
end
return out
