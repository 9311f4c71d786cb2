-- producer: register a producer on one partition, or renew its registration (heartbeat).
-- KEYS[1] producers zset (producer id -> last heartbeat, ms of Redis time),
-- KEYS[2] the partition's abuse limits hash, written by the owning worker
-- ARGV[1] producer id, ARGV[2] expiry ms (a producer silent this long no longer counts),
-- ARGV[3] partition (full name, for the error text)
-- A producer not registered yet is refused when the partition already has maxProducersPerTopic
-- live producers (0 or absent = no limit).  Returns {maxMessageSize in bytes (5 MB, Pulsar's
-- default, until a worker wrote the limits), durableAckReplicas (0 = none), durableAckTimeoutMs},
-- or the error "ProducerBusy ...".
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - tonumber(ARGV[2])))
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  local max = tonumber(redis.call('HGET', KEYS[2], 'maxProducersPerTopic')) or 0
  if max > 0 and redis.call('ZCARD', KEYS[1]) >= max then
    return redis.error_reply("ProducerBusy Topic '" .. ARGV[3] .. "' reached max producers limit")
  end
end
redis.call('ZADD', KEYS[1], now, ARGV[1])
local l = redis.call('HMGET', KEYS[2], 'maxMessageSize', 'durableAckReplicas',
  'durableAckTimeoutMs')
return {tonumber(l[1]) or 5242880, tonumber(l[2]) or 0, tonumber(l[3]) or 0}
