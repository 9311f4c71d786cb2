-- worker_heartbeat: renew a worker's entry in the fleet registry and read the live workers,
-- in one atomic step on Redis time.
-- KEYS[1] registry (zset: worker -> heartbeat expiry in ms, Redis time); ARGV[1] worker id,
-- ARGV[2] lease TTL (ms).
-- Returns {now (ms), 1 when the caller's own entry had expired or was gone else 0, the live
-- workers...}.  Expired entries are removed here, so a worker that another one saw expire
-- (and whose leases it may then take) finds its own entry gone on its next heartbeat.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local previous = redis.call('ZSCORE', KEYS[1], ARGV[1])
local lapsed = 0
if not previous or tonumber(previous) <= now then lapsed = 1 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local reply = {now, lapsed}
for _, worker in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], now, '+inf')) do
  reply[#reply + 1] = worker
end
return reply
