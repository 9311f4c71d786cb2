-- ack_cumulative: acknowledge every entry pending for a consumer up to and including an id.
-- KEYS[1] stream, KEYS[2] redeliver zset, KEYS[3] subscription stats hash,
-- KEYS[4] waitack flag (the dispatcher stopped at a max-unacked limit)
-- ARGV[1] subscription (group), ARGV[2] consumer, ARGV[3] last entry id,
-- ARGV[4] wake channel, ARGV[5] wake payload
-- Returns the number of entries acknowledged; wakes a dispatcher waiting for acks
-- (or a dormant partition).
local total = 0
while true do
  local pending = redis.call('XPENDING', KEYS[1], ARGV[1], '-', ARGV[3], 1000, ARGV[2])
  if #pending == 0 then break end
  local ids = {}
  for i, p in ipairs(pending) do ids[i] = p[1] end
  total = total + redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
  redis.call('ZREM', KEYS[2], unpack(ids))
  if #pending < 1000 then break end
end
if total > 0 then
  redis.call('HINCRBY', KEYS[3], 'acked', total)
  local waiting = redis.call('DEL', KEYS[4]) == 1
  if redis.call('DEL', string.match(KEYS[1], '^sl:%b{}:') .. 'dormant') == 1 or waiting then redis.call('PUBLISH', ARGV[4], ARGV[5]) end
end
return total
