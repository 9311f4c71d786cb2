-- produce: append entries to a partition's stream and wake subscriptions waiting for data.
-- KEYS[1] stream, KEYS[2] partition stats hash, KEYS[3] idle set,
-- KEYS[4] (optional) backlog quota flag, set by the owning worker while the quota is reached
-- KEYS[5] (optional) the partition's abuse limits hash, written by the owning worker (when
-- absent, the partition's key next to KEYS[1])
-- ARGV[1] wake channel, ARGV[2] wake payload, ARGV[3] number of entries N, then per entry:
--   field count F (pairs), then F field/value pairs (field "d" = payload, "n" = messages)
-- Returns the array of new entry ids.  Nothing is written when it returns an error:
-- "MessageTooBig <reason>" when an entry's payload (a message, or a batch of them) is over the
-- partition's maxMessageSize (5 MB until a worker wrote the limits), or the whole entry over it
-- plus 10 KB (Pulsar's frame padding, room for keys and properties); or
-- "TOO_MANY_REQUESTS <policy> <reason>" while the quota refuses producers.
-- Publish time "t" is the server's clock (ms).
local limits = KEYS[5] or (string.sub(KEYS[1], 1, -4) .. 'limits')
local max_size = tonumber(redis.call('HGET', limits, 'maxMessageSize')) or 5242880
local pos = 4
for i = 1, tonumber(ARGV[3]) do
  local pairs_count = tonumber(ARGV[pos])
  local size = 0
  for j = 1, pairs_count do
    local field, value = ARGV[pos + 2 * j - 1], ARGV[pos + 2 * j]
    size = size + #field + #value
    if field == 'd' and #value > max_size then
      return redis.error_reply('MessageTooBig a payload of ' .. #value ..
        ' bytes exceeds maxMessageSize (' .. max_size .. ' bytes)')
    end
  end
  if size > max_size + 10240 then
    return redis.error_reply('MessageTooBig an entry of ' .. size ..
      ' bytes exceeds maxMessageSize (' .. max_size .. ' bytes) plus 10240 bytes of metadata')
  end
  pos = pos + 1 + 2 * pairs_count
end
if KEYS[4] then
  local quota = redis.call('GET', KEYS[4])
  if quota then
    redis.call('HINCRBY', KEYS[2], 'quota_rejected', 1)
    return redis.error_reply('TOO_MANY_REQUESTS ' .. quota)
  end
end
local t = redis.call('TIME')
local now = tostring(t[1] * 1000 + math.floor(t[2] / 1000))
local ids = {}
pos = 4
local msgs, bytes, batches = 0, 0, 0
for i = 1, tonumber(ARGV[3]) do
  local pairs_count = tonumber(ARGV[pos])
  local args = {KEYS[1], '*', 't', now}
  local n = 1
  for j = 1, pairs_count do
    local field, value = ARGV[pos + 2 * j - 1], ARGV[pos + 2 * j]
    args[#args + 1] = field
    args[#args + 1] = value
    if field == 'd' then bytes = bytes + #value
    elseif field == 'n' then n = tonumber(value) batches = batches + 1 end
  end
  msgs = msgs + n
  ids[i] = redis.call('XADD', unpack(args))
  pos = pos + 1 + 2 * pairs_count
end
redis.call('HINCRBY', KEYS[2], 'msg_in', msgs)
redis.call('HINCRBY', KEYS[2], 'bytes_in', bytes)
-- Workers size reads without looking at entries while a partition has no batch entries.
if batches > 0 then redis.call('HINCRBY', KEYS[2], 'batch_entries', batches) end
if redis.call('SCARD', KEYS[3]) > 0 then
  redis.call('DEL', KEYS[3])
  redis.call('PUBLISH', ARGV[1], ARGV[2])
end
return ids
