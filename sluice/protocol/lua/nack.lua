-- nack: schedule entries for redelivery (negative ack, ack timeout) and wake the worker.
-- KEYS[1] stream, KEYS[2] redeliver zset
-- ARGV[1] subscription (group), ARGV[2] due time ms, ARGV[3] wake channel,
-- ARGV[4] wake payload, ARGV[5..] entry ids
-- Only entries still pending are scheduled.  Returns how many were scheduled.
-- include lib/levels.lua
local n = 0
for i = 5, #ARGV do
  local p = redis.call('XPENDING', stream_of(KEYS[1], ARGV[i]), ARGV[1], ARGV[i], ARGV[i], 1)
  if #p > 0 then
    redis.call('ZADD', KEYS[2], ARGV[2], ARGV[i])
    n = n + 1
  end
end
if n > 0 then
  redis.call('DEL', string.match(KEYS[1], '^sl:%b{}:') .. 'dormant')
  redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return n
