-- flow: give a consumer more permits (messages it can take) and refresh its heartbeat.
-- KEYS[1] permits hash, KEYS[2] waitp flag, KEYS[3] alive zset
-- ARGV[1] consumer, ARGV[2] permits to add (0 = heartbeat only), ARGV[3] now ms,
-- ARGV[4] wake channel, ARGV[5] wake payload
-- Permits wake the worker when the subscription waits for them or the partition is dormant.
-- Returns 1, or 0 when the consumer is no longer registered (it must subscribe again).
-- include lib/wake_waiting.lua
if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
local add = tonumber(ARGV[2])
if add > 0 then
  redis.call('HINCRBY', KEYS[1], ARGV[1], add)
  wake_waiting(KEYS[2], ARGV[4], ARGV[5])
end
return 1
