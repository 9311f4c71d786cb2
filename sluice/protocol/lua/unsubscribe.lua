-- unsubscribe: delete a subscription from one partition, unless other consumers use it.
-- KEYS[1] stream, KEYS[2] subs set, KEYS[3] idle set, KEYS[4] alive zset, KEYS[5] info hash
-- ARGV[1] subscription, ARGV[2] consumer asking ("" = administrative delete),
-- ARGV[3] subscription key prefix ("sl:{P}:s:{S}:"), ARGV[4] now ms, ARGV[5] consumer timeout ms,
-- ARGV[6] wake channel, ARGV[7] wake payload
-- Returns 1 when deleted, 0 when the subscription did not exist, or "SubscriptionBusy ...".
local now = tonumber(ARGV[4])
local alive = redis.call('ZRANGEBYSCORE', KEYS[4], now - tonumber(ARGV[5]), '+inf')
for _, c in ipairs(alive) do
  if c ~= ARGV[2] then
    return redis.error_reply('SubscriptionBusy Subscription has active consumers')
  end
end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then return 0 end
for _, c in ipairs(redis.call('HKEYS', KEYS[5])) do redis.call('DEL', ARGV[3] .. 'q:' .. c) end
for _, c in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do redis.call('DEL', ARGV[3] .. 'q:' .. c) end
for _, name in ipairs({'meta', 'cursor', 'permits', 'alive', 'info', 'redeliver', 'delayed', 'waitp',
    'waitack', 'stats', 'lim', 'ks', 'prio:0', 'prio:1', 'prio:2', 'prio:3', 'prio:4', 'prio:5', 'prio:6',
    'prio:7', 'prio:8', 'prio:9'}) do
  redis.call('DEL', ARGV[3] .. name)
end
-- include lib/levels.lua
for _, stream in ipairs(streams_of(KEYS[1])) do redis.pcall('XGROUP', 'DESTROY', stream, ARGV[1]) end
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('DEL', string.match(KEYS[1], '^sl:%b{}:') .. 'dormant')
redis.call('PUBLISH', ARGV[6], ARGV[7])
return 1
