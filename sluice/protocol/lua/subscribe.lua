-- subscribe: create the subscription if needed and register a consumer on one partition.
-- KEYS[1] stream, KEYS[2] subs set, KEYS[3] meta hash, KEYS[4] cursor, KEYS[5] permits hash,
-- KEYS[6] alive zset, KEYS[7] info hash, KEYS[8] (optional) the partition's abuse limits hash,
-- KEYS[9] (optional) the subscribe counter of the consumer name from the client's host
-- (default: ARGV[11] .. 'subrate:/' .. the name)
-- ARGV[1] subscription, ARGV[2] consumer id, ARGV[3] type (Exclusive|Shared|Failover|Key_Shared),
-- ARGV[4] initial position (latest|earliest), ARGV[5] now ms, ARGV[6] consumer info JSON,
-- ARGV[7] wake channel, ARGV[8] wake payload, ARGV[9] consumer timeout ms,
-- ARGV[10] partition (full name, for error texts), ARGV[11] partition key prefix ("sl:{P}:"),
-- ARGV[12] (optional) consumer name (default: the consumer id), ARGV[13] (optional) the
-- client's host (its address as Redis sees it), named in the refusal
-- An empty consumer id only makes sure the subscription exists (admin create-subscription,
-- the catalog); no limit applies to it.  A consumer is first counted against the subscribe
-- rate (subscribeThrottlingRatePerConsumer requests of one consumer name from one client host
-- per subscribeRatePeriodPerConsumerInSecond, a period opening with the first request;
-- as in Pulsar a request counts even when a later check refuses it, a refused one does not),
-- then checked, before anything else is written, against the limits the owning worker wrote
-- (0 or absent = no limit): a new subscription against maxSubscriptionsPerTopic, a consumer
-- not connected yet against maxConsumersPerTopic and maxConsumersPerSubscription.  Consumers
-- that stopped heartbeating do not count.
-- A Key_Shared consumer (info JSON keySharedMode AUTO_SPLIT or STICKY, ranges [[start, end],
-- ...]) is refused when its mode differs from a live consumer's ("SubscriptionBusy") or, STICKY,
-- when one of its ranges overlaps a live consumer's ("ConsumerBusy Range conflict ...").
-- Returns "OK", or an error reply "ConsumerBusy ..." / "SubscriptionBusy ..." /
-- "NotAllowed ..." / "SubscribeRateLimited <wait ms> ...".
local now = tonumber(ARGV[5])
local since = now - tonumber(ARGV[9])
local consumer = ARGV[2]
local live = redis.call('ZCOUNT', KEYS[6], since, '+inf')
local exists = redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1
if consumer ~= '' and KEYS[8] then
  local rate = redis.call('HMGET', KEYS[8], 'subscribeThrottlingRatePerConsumer',
    'subscribeRatePeriodPerConsumerInSecond')
  local per, period = tonumber(rate[1]) or 0, tonumber(rate[2]) or 0
  if per > 0 and period > 0 then
    local name = ARGV[12] or consumer
    local counter = KEYS[9] or (ARGV[11] .. 'subrate:/' .. name)
    local from = (ARGV[13] and ARGV[13] ~= '') and (' from ' .. ARGV[13]) or ''
    local made = tonumber(redis.call('GET', counter)) or 0
    if made >= per then
      local wait = redis.call('PTTL', counter)
      if wait < 0 then
        wait = period * 1000
        redis.call('PEXPIRE', counter, wait)
      end
      return redis.error_reply('SubscribeRateLimited ' .. wait .. ' Subscribe limited by ' ..
        'subscribe rate limit per consumer. Consumer \'' .. name .. '\'' .. from ..
        ' may subscribe ' ..
        per .. ' times per ' .. period .. ' s to ' .. ARGV[10])
    end
    redis.call('INCR', counter)
    if made == 0 then redis.call('PEXPIRE', counter, period * 1000) end
  end
end
if consumer ~= '' then
  local score = redis.call('ZSCORE', KEYS[6], consumer)
  if exists then
    local current = redis.call('HGET', KEYS[3], 'type')
    if current and current ~= '' and current ~= ARGV[3] and live > 0 then
      return redis.error_reply('SubscriptionBusy Subscription is of different type')
    end
  end
  if ARGV[3] == 'Key_Shared' then
    local ok, mine = pcall(cjson.decode, ARGV[6])
    if not ok or type(mine) ~= 'table' then mine = {} end
    local mode = mine.keySharedMode or 'AUTO_SPLIT'
    local infos = redis.call('HGETALL', KEYS[7])
    for i = 1, #infos, 2 do
      local other = infos[i]
      local seen = other ~= consumer and redis.call('ZSCORE', KEYS[6], other)
      if seen and tonumber(seen) >= since then
        local decoded, theirs = pcall(cjson.decode, infos[i + 1])
        if not decoded or type(theirs) ~= 'table' then theirs = {} end
        if (theirs.keySharedMode or 'AUTO_SPLIT') ~= mode then
          return redis.error_reply('SubscriptionBusy Subscription is of different Key_Shared ' ..
            'mode: ' .. (theirs.keySharedMode or 'AUTO_SPLIT') .. ', not ' .. mode)
        end
        if mode == 'STICKY' then
          for _, a in ipairs(mine.ranges or {}) do
            for _, b in ipairs(theirs.ranges or {}) do
              if a[1] <= b[2] and b[1] <= a[2] then
                return redis.error_reply('ConsumerBusy Range conflict with consumer ' ..
                  (theirs.name or other) .. ': [' .. a[1] .. ', ' .. a[2] .. '] overlaps [' ..
                  b[1] .. ', ' .. b[2] .. ']')
              end
            end
          end
        end
      end
    end
  end
  if ARGV[3] == 'Exclusive' and live > 0 and not score then
    return redis.error_reply('ConsumerBusy Exclusive consumer is already connected')
  end
  local joining = not score or tonumber(score) < since
  if KEYS[8] then
    local limits = redis.call('HMGET', KEYS[8], 'maxSubscriptionsPerTopic',
      'maxConsumersPerTopic', 'maxConsumersPerSubscription')
    local max_subs = tonumber(limits[1]) or 0
    local max_topic = tonumber(limits[2]) or 0
    local max_sub = tonumber(limits[3]) or 0
    if not exists and max_subs > 0 and redis.call('SCARD', KEYS[2]) >= max_subs then
      return redis.error_reply(
        'NotAllowed Exceed the maximum number of subscriptions of the topic: ' .. ARGV[10])
    end
    if joining and max_topic > 0 then
      local total = 0
      for _, name in ipairs(redis.call('SMEMBERS', KEYS[2])) do
        total = total + redis.call('ZCOUNT', ARGV[11] .. 's:' .. name .. ':alive', since, '+inf')
        if total >= max_topic then
          return redis.error_reply('ConsumerBusy Topic reached max consumers limit')
        end
      end
    end
    if joining and max_sub > 0 and live >= max_sub then
      return redis.error_reply('ConsumerBusy Subscription reached max consumers limit')
    end
  end
end
-- include lib/levels.lua
-- The group's creation on one stream of the partition, at its start or after its last entry.
local function group_create(stream)
  local start = '0-0'
  local create = {'XGROUP', 'CREATE', stream, ARGV[1], start, 'MKSTREAM'}
  if ARGV[4] == 'latest' then
    local last = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
    if #last > 0 then
      start = last[1][1]
      -- Every entry ever added counts as read, so Redis can tell the group's lag.
      local info = redis.call('XINFO', 'STREAM', stream)
      local added = 0
      for i = 1, #info, 2 do
        if info[i] == 'entries-added' then added = info[i + 1] end
      end
      create = {'XGROUP', 'CREATE', stream, ARGV[1], start, 'ENTRIESREAD', added}
    end
  end
  local ok = redis.pcall(unpack(create))
  if type(ok) == 'table' and ok.err and not string.find(ok.err, 'BUSYGROUP') then
    return start, ok
  end
  return start, nil
end
if not exists then
  local start, failed = group_create(KEYS[1])
  if failed then return failed end
  -- Level streams (lib/levels.lua): the group starts on each at the same place.
  for _, level in ipairs(side_levels(KEYS[1])) do
    local _, err = group_create(level_stream(KEYS[1], level))
    if err then return err end
  end
  redis.call('SADD', KEYS[2], ARGV[1])
  redis.call('HSET', KEYS[3], 'type', ARGV[3], 'created', ARGV[5])
  redis.call('SET', KEYS[4], start)
elseif consumer ~= '' then
  redis.call('HSET', KEYS[3], 'type', ARGV[3])
end
if consumer == '' then return 'OK' end
redis.call('ZADD', KEYS[6], now, consumer)
redis.call('HSET', KEYS[7], consumer, ARGV[6])
redis.call('HSETNX', KEYS[5], consumer, 0)
redis.call('DEL', ARGV[11] .. 'dormant')
redis.call('PUBLISH', ARGV[7], ARGV[8])
return 'OK'
