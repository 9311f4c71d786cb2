-- ack_tail (a piece of ack.lua and ack_cumulative.lua, spliced in by sluice.protocol.scripts;
-- both have KEYS[1] stream, KEYS[2] redeliver zset, KEYS[3] subscription stats hash, KEYS[4]
-- waitack flag).  ack_ids acknowledges entry ids of group ARGV[1] and drops them from the
-- redeliver zset, returning how many were pending; acked counts n acknowledged entries in
-- the stats hash and, when there were some, wakes a dispatcher waiting for acks (or a
-- dormant partition) on channel with payload.  Ids of level streams are acknowledged in
-- theirs (lib/levels.lua).
-- include lib/wake_waiting.lua
-- include lib/levels.lua
local function ack_ids(ids)
  local n = 0
  for _, g in ipairs(by_stream(KEYS[1], ids)) do
    n = n + redis.call('XACK', g[1], ARGV[1], unpack(g[2]))
  end
  redis.call('ZREM', KEYS[2], unpack(ids))
  return n
end
local function acked(n, channel, payload)
  if n > 0 then
    redis.call('HINCRBY', KEYS[3], 'acked', n)
    wake_waiting(KEYS[4], channel, payload)
  end
  return n
end
