-- stats_read: one atomic reading of a partition's counters and gauges for its stats document
-- (a worker's stats tick), in place of a pipeline of four commands per subscription.
-- KEYS[1] the partition's stats hash, KEYS[2] its log (stream); then per subscription i
-- (its name ARGV[i]): KEYS[3i] stats hash, KEYS[3i+1] permits hash, KEYS[3i+2] info hash.
-- Returns {partition stats (flat HGETALL), XINFO GROUPS of the log ({} when it has none),
-- then per subscription {stats (flat, followed by the pair "msg_delayed" N as stats_live.lua
-- counts it), XPENDING summary (false when the group is gone),
-- permits (flat), info (flat), messages waiting in its priority index per priority 0..9
-- (false when none waits; the lists "prio:<priority>" next to its stats hash,
-- dispatch.lua's)}}.
local groups = redis.pcall('XINFO', 'GROUPS', KEYS[2])
if type(groups) ~= 'table' or groups.err then groups = {} end
local out = {redis.call('HGETALL', KEYS[1]), groups}
for i = 1, #ARGV do
  local base = 3 * i
  local pending = redis.pcall('XPENDING', KEYS[2], ARGV[i])
  if type(pending) ~= 'table' or pending.err then pending = false end
  local prio = string.sub(KEYS[base], 1, -6) .. 'prio:'
  local levels, any = {}, false
  for level = 0, 9 do
    levels[level + 1] = redis.call('LLEN', prio .. level)
    if levels[level + 1] > 0 then any = true end
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
