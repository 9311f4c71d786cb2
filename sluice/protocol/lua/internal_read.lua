-- internal_read: one atomic reading of a partition's storage for internalStats: the stream,
-- every consumer group with its pending summary, consumers and scheduled redeliveries, and the
-- lease, all as of the same moment (a dispatch between two reads would otherwise show a
-- cursor older than the pending entries it handed out).
-- KEYS[1] the partition's log (stream), KEYS[2] its lease.
-- ARGV[1] the key prefix of the partition's subscriptions ("sl:{P}:s:"); a subscription's
-- redelivery schedule is ARGV[1] .. name .. ":redeliver" (the partition's slot).
-- Returns {XINFO STREAM (flat; false without a stream), lease token (false when none),
-- then per group {XINFO GROUPS entry (flat), XPENDING summary, XINFO CONSUMERS, ZCARD}}.
local stream = redis.pcall('XINFO', 'STREAM', KEYS[1])
if type(stream) ~= 'table' or stream.err then stream = false end
local out = {stream, redis.call('GET', KEYS[2])}
local groups = {}
if stream then groups = redis.call('XINFO', 'GROUPS', KEYS[1]) end
for i = 1, #groups do
  local group = groups[i]
  local name
  for j = 1, #group, 2 do
    if group[j] == 'name' then name = group[j + 1] end
  end
  out[#out + 1] = {
    group,
    redis.call('XPENDING', KEYS[1], name),
    redis.call('XINFO', 'CONSUMERS', KEYS[1], name),
    redis.call('ZCARD', ARGV[1] .. name .. ':redeliver'),
  }
end
return out
