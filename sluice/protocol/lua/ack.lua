-- ack: acknowledge entries individually.
-- KEYS[1] stream, KEYS[2] redeliver zset, KEYS[3] subscription stats hash,
-- KEYS[4] waitack flag (the dispatcher stopped at a max-unacked limit)
-- ARGV[1] subscription (group), ARGV[2] wake channel, ARGV[3] wake payload, ARGV[4..] entry ids
-- Returns the number of entries that were pending and are now acknowledged.  When some were
-- and the dispatcher waits for acks, it is woken,
-- and so is a dormant partition.
local ids = {}
for i = 4, #ARGV do ids[#ids + 1] = ARGV[i] end
local n = redis.call('XACK', KEYS[1], ARGV[1], unpack(ids))
redis.call('ZREM', KEYS[2], unpack(ids))
if n > 0 then
  redis.call('HINCRBY', KEYS[3], 'acked', n)
  local waiting = redis.call('DEL', KEYS[4]) == 1
  if redis.call('DEL', string.match(KEYS[1], '^sl:%b{}:') .. 'dormant') == 1 or waiting then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
end
return n
