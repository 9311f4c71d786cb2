-- produce: append entries to a partition's stream and wake subscriptions waiting for data.
-- KEYS[1] stream, KEYS[2] partition stats hash, KEYS[3] idle set,
-- KEYS[4] (optional) backlog quota flag, set by the owning worker while the quota is reached
-- KEYS[5] (optional) the partition's abuse limits hash, written by the owning worker (when
-- absent, the partition's key next to KEYS[1])
-- KEYS[6] (optional) the partition's publish-rate window (when absent, the partition's key
-- next to KEYS[1]): hash e (end of the window, ms of Redis time), m and b (messages and
-- payload bytes written in it); it expires when the window ends
-- ARGV[1] wake channel, ARGV[2] wake payload (sent when a subscription waits for data, or when the
-- partition is dormant), ARGV[3] number of entries N, then per entry:
--   field count F (pairs), then F field/value pairs (field "d" = payload, "n" = messages),
--   then (optional) the replicas the caller waits for once the call returns (WAIT)
-- Returns the array of new entry ids.  Nothing is written when it returns an error:
-- "MessageTooBig <reason>" when an entry's payload (a message, or a batch of them) is over the
-- partition's maxMessageSize (5 MB until a worker wrote the limits), or the whole entry over it
-- plus 10 KB (Pulsar's frame padding, room for keys and properties); or
-- "TOO_MANY_REQUESTS <policy> <reason>" while the quota refuses producers; or
-- "PublishRateLimited <wait ms> <reason>" when the call does not fit the publish rate's window:
-- the caller tries again after <wait ms>, when the window has ended; or
-- "DurableAcks <replicas> <timeout ms>" when the caller said it waits for fewer replicas than
-- the partition's durableAckReplicas (limits hash): it waits for those and calls again.
-- Publish rate: at most publishThrottlingRateInMsg messages (a batch entry counts its "n") and
-- publishThrottlingRateInByte payload bytes per window of one second (limits hash; 0 or absent
-- = no limit).  A window opens with the first call after the previous one ended, so by T
-- seconds after the first send at most LIMIT x (floor(T) + 1) were written.  A call larger
-- than a whole window's budget is written only into an empty window, which then lasts as many
-- seconds as the call needs.  A changed limit applies to the next call; the window keeps what
-- it holds.  Refused calls are counted in KEYS[2]'s publish_throttled.
-- Publish time "t" is the server's clock (ms).
local limits = KEYS[5] or (string.sub(KEYS[1], 1, -4) .. 'limits')
local max_size = tonumber(redis.call('HGET', limits, 'maxMessageSize')) or 5242880
local pos = 4
local call_msgs, call_bytes = 0, 0
for i = 1, tonumber(ARGV[3]) do
  local pairs_count = tonumber(ARGV[pos])
  local size, n = 0, 1
  for j = 1, pairs_count do
    local field, value = ARGV[pos + 2 * j - 1], ARGV[pos + 2 * j]
    size = size + #field + #value
    if field == 'd' then
      call_bytes = call_bytes + #value
      if #value > max_size then
        return redis.error_reply('MessageTooBig a payload of ' .. #value ..
          ' bytes exceeds maxMessageSize (' .. max_size .. ' bytes)')
      end
    elseif field == 'n' then n = tonumber(value) or 1 end
  end
  call_msgs = call_msgs + n
  if size > max_size + 10240 then
    return redis.error_reply('MessageTooBig an entry of ' .. size ..
      ' bytes exceeds maxMessageSize (' .. max_size .. ' bytes) plus 10240 bytes of metadata')
  end
  pos = pos + 1 + 2 * pairs_count
end
local promised = tonumber(ARGV[pos])
if promised then
  local d = redis.call('HMGET', limits, 'durableAckReplicas', 'durableAckTimeoutMs')
  local required = tonumber(d[1]) or 0
  if required > promised then
    return redis.error_reply('DurableAcks ' .. required .. ' ' .. (tonumber(d[2]) or 1000))
  end
end
if KEYS[4] then
  local quota = redis.call('GET', KEYS[4])
  if quota then
    redis.call('HINCRBY', KEYS[2], 'quota_rejected', 1)
    return redis.error_reply('TOO_MANY_REQUESTS ' .. quota)
  end
end
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
local now = tostring(now_ms)
local rate = redis.call('HMGET', limits, 'publishThrottlingRateInMsg',
  'publishThrottlingRateInByte')
local rate_m, rate_b = tonumber(rate[1]) or 0, tonumber(rate[2]) or 0
if rate_m > 0 or rate_b > 0 then
  local window = KEYS[6] or (string.sub(KEYS[1], 1, -4) .. 'pubrate')
  local w = redis.call('HMGET', window, 'e', 'm', 'b')
  local ends, used_m, used_b = tonumber(w[1]), tonumber(w[2]) or 0, tonumber(w[3]) or 0
  if not ends or now_ms >= ends then ends, used_m, used_b = now_ms + 1000, 0, 0 end
  if (rate_m > 0 and used_m + call_msgs > rate_m) or
      (rate_b > 0 and used_b + call_bytes > rate_b) then
    if used_m > 0 or used_b > 0 then
      redis.call('HINCRBY', KEYS[2], 'publish_throttled', 1)
      return redis.error_reply('PublishRateLimited ' .. (ends - now_ms) .. ' ' .. used_m ..
        ' of ' .. rate_m .. ' messages and ' .. used_b .. ' of ' .. rate_b ..
        ' bytes (0 = no limit) used in this second')
    end
    local windows = 1
    if rate_m > 0 then windows = math.max(windows, math.ceil(call_msgs / rate_m)) end
    if rate_b > 0 then windows = math.max(windows, math.ceil(call_bytes / rate_b)) end
    ends = ends + (windows - 1) * 1000
  end
  redis.call('HSET', window, 'e', ends, 'm', used_m + call_msgs, 'b', used_b + call_bytes)
  redis.call('PEXPIREAT', window, ends)
end
local ids = {}
pos = 4
local msgs, bytes, batches, delayed, prioritized = 0, 0, 0, 0, 0
for i = 1, tonumber(ARGV[3]) do
  local pairs_count = tonumber(ARGV[pos])
  local args = {KEYS[1], '*', 't', now}
  local n = 1
  for j = 1, pairs_count do
    local field, value = ARGV[pos + 2 * j - 1], ARGV[pos + 2 * j]
    args[#args + 1] = field
    args[#args + 1] = value
    if field == 'd' then bytes = bytes + #value
    elseif field == 'n' then n = tonumber(value) batches = batches + 1
    elseif field == 'a' then delayed = delayed + 1
    elseif field == 'u' then prioritized = prioritized + 1 end
  end
  msgs = msgs + n
  ids[i] = redis.call('XADD', unpack(args))
  pos = pos + 1 + 2 * pairs_count
end
redis.call('HINCRBY', KEYS[2], 'msg_in', msgs)
redis.call('HINCRBY', KEYS[2], 'bytes_in', bytes)
-- Workers size reads without looking at entries while a partition has no batch entries.
if batches > 0 then redis.call('HINCRBY', KEYS[2], 'batch_entries', batches) end
-- ... and while it has no delayed entries (deliver-at field "a").
if delayed > 0 then redis.call('HINCRBY', KEYS[2], 'delayed_entries', delayed) end
-- ... and while it has no entries of a priority other than the default (field "u").
if prioritized > 0 then redis.call('HINCRBY', KEYS[2], 'priority_entries', prioritized) end
-- A dormant partition (sl:{P}:dormant, set by its worker when it stopped watching it) is
-- woken too; the worker deletes the flag itself otherwise.
local wake = redis.call('DEL', string.match(KEYS[1], '^sl:%b{}:') .. 'dormant') == 1
if redis.call('SCARD', KEYS[3]) > 0 then
  redis.call('DEL', KEYS[3])
  wake = true
end
if wake then redis.call('PUBLISH', ARGV[1], ARGV[2]) end
return ids
