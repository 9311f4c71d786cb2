-- topic_create: register a topic a client creates on first use, within maxTopicsPerNamespace.
-- KEYS[1] topic registry hash (sl:{meta}:topics), KEYS[2] namespaces' own topic limits hash
-- (sl:{meta}:maxtopics), KEYS[3] client settings hash (sl:{meta}:config: the broker's limit)
-- ARGV[1] topic (full name), ARGV[2] its registry record (JSON), ARGV[3] topics it adds (its
-- partitions, 1 when non-partitioned), ARGV[4] namespace (tenant/ns), ARGV[5] wake channel,
-- ARGV[6] wake payload
-- The namespace's topics are counted as Pulsar counts them: a partitioned topic counts its
-- partitions (only when a limit is set: the count reads the whole registry).
-- Returns the topic's record (an existing one wins: another client created it first), or the
-- error "NotAllowed Exceed maximum number of topics in namespace." (nothing written).
local existing = redis.call('HGET', KEYS[1], ARGV[1])
if existing then return existing end
local limit = tonumber(redis.call('HGET', KEYS[2], ARGV[4]))
if not limit then limit = tonumber(redis.call('HGET', KEYS[3], 'maxTopicsPerNamespace')) or 0 end
if limit > 0 then
  local prefix = 'persistent://' .. ARGV[4] .. '/'
  local count = 0
  local seen = {}  -- HSCAN may return an element twice
  local cursor = '0'
  repeat
    local reply = redis.call('HSCAN', KEYS[1], cursor, 'COUNT', 1000)
    cursor = reply[1]
    local items = reply[2]
    for i = 1, #items, 2 do
      if not seen[items[i]] and string.sub(items[i], 1, #prefix) == prefix then
        seen[items[i]] = true
        local partitions = tonumber(cjson.decode(items[i + 1])['partitions']) or 0
        count = count + math.max(partitions, 1)
      end
    end
  until cursor == '0'
  if count + tonumber(ARGV[3]) > limit then
    return redis.error_reply('NotAllowed Exceed maximum number of topics in namespace.')
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PUBLISH', ARGV[5], ARGV[6])
return ARGV[2]
