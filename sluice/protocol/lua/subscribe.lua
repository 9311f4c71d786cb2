-- subscribe: create the subscription if needed and register a consumer on one partition.
-- KEYS[1] stream, KEYS[2] subs set, KEYS[3] meta hash, KEYS[4] cursor, KEYS[5] permits hash,
-- KEYS[6] alive zset, KEYS[7] info hash
-- ARGV[1] subscription, ARGV[2] consumer id, ARGV[3] type (Exclusive|Shared|Failover),
-- ARGV[4] initial position (latest|earliest), ARGV[5] now ms, ARGV[6] consumer info JSON,
-- ARGV[7] wake channel, ARGV[8] wake payload, ARGV[9] consumer timeout ms
-- An empty consumer id only makes sure the subscription exists (admin create-subscription).
-- Returns "OK", or an error reply "ConsumerBusy ..." / "SubscriptionBusy ...".
local now = tonumber(ARGV[5])
-- Consumers that stopped heartbeating no longer count (the worker reaps them).
local live = redis.call('ZCOUNT', KEYS[6], now - tonumber(ARGV[9]), '+inf')
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then
  local start = '0-0'
  if ARGV[4] == 'latest' then
    local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
    if #last > 0 then start = last[1][1] end
  end
  local ok = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], start, 'MKSTREAM')
  if type(ok) == 'table' and ok.err and not string.find(ok.err, 'BUSYGROUP') then
    return ok
  end
  redis.call('SADD', KEYS[2], ARGV[1])
  redis.call('HSET', KEYS[3], 'type', ARGV[3], 'created', ARGV[5])
  redis.call('SET', KEYS[4], start)
elseif ARGV[2] ~= '' then
  local current = redis.call('HGET', KEYS[3], 'type')
  if current and current ~= '' and current ~= ARGV[3] then
    if live > 0 then
      return redis.error_reply('SubscriptionBusy Subscription is of different type')
    end
  end
  redis.call('HSET', KEYS[3], 'type', ARGV[3])
end
if ARGV[2] == '' then return 'OK' end
if ARGV[3] == 'Exclusive' and live > 0 and not redis.call('ZSCORE', KEYS[6], ARGV[2]) then
  return redis.error_reply('ConsumerBusy Exclusive consumer is already connected')
end
redis.call('ZADD', KEYS[6], now, ARGV[2])
redis.call('HSET', KEYS[7], ARGV[2], ARGV[6])
redis.call('HSETNX', KEYS[5], ARGV[2], 0)
redis.call('PUBLISH', ARGV[7], ARGV[8])
return 'OK'
