-- fleet_read: the live workers (heartbeat not expired, by Redis time) and the change-event
-- position each one confirmed, for the admin service's wait until a change is enforced.
-- KEYS[1] the fleet registry (zset: worker -> heartbeat expiry, ms), KEYS[2] the confirmed
-- positions (hash: worker -> stream id).
-- Returns {worker, position ("" when none), worker, position, ...}.
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local live = redis.call('ZRANGEBYSCORE', KEYS[1], now_ms, '+inf')
local out = {}
for i, worker in ipairs(live) do
  out[2 * i - 1] = worker
  out[2 * i] = redis.call('HGET', KEYS[2], worker) or ''
end
return out
