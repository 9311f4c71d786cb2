-- release: remove a consumer (closed, or reaped after missing heartbeats); everything it held
-- -- queued but not received, received but not acknowledged -- becomes due for redelivery.
-- KEYS[1] stream, KEYS[2] permits hash, KEYS[3] alive zset, KEYS[4] info hash,
-- KEYS[5] redeliver zset, KEYS[6] the consumer's queue
-- ARGV[1] subscription (group), ARGV[2] consumer, ARGV[3] now ms, ARGV[4] wake channel,
-- ARGV[5] wake payload
-- Returns the number of entries scheduled for redelivery.
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[2])
redis.call('DEL', KEYS[6])
-- include lib/levels.lua
local count = 0
local streams = streams_of(KEYS[1])
for _, stream in ipairs(streams) do
  local start = '-'
  while true do
    local pending = redis.call('XPENDING', stream, ARGV[1], start, '+', 1000, ARGV[2])
    for _, p in ipairs(pending) do
      -- LT keeps an earlier due time and still adds members that are not there yet.
      redis.call('ZADD', KEYS[5], 'LT', ARGV[3], p[1])
      count = count + 1
    end
    if #pending < 1000 then break end
    start = '(' .. pending[#pending][1]
  end
end
if count == 0 then
  for _, stream in ipairs(streams) do
    redis.call('XGROUP', 'DELCONSUMER', stream, ARGV[1], ARGV[2])
  end
end
redis.call('DEL', string.match(KEYS[1], '^sl:%b{}:') .. 'dormant')
redis.call('PUBLISH', ARGV[4], ARGV[5])
return count
