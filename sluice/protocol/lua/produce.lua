-- produce: append entries to a partition's stream and wake subscriptions waiting for data.
-- KEYS[1] stream, KEYS[2] partition stats hash, KEYS[3] idle set,
-- KEYS[4] (optional) backlog quota flag, set by the owning worker while the quota is reached
-- ARGV[1] wake channel, ARGV[2] wake payload, ARGV[3] number of entries N, then per entry:
--   field count F (pairs), then F field/value pairs (field "d" = payload, "n" = messages)
-- Returns the array of new entry ids, or the error "TOO_MANY_REQUESTS <policy> <reason>"
-- (nothing written) while the quota refuses producers.  Publish time "t" is the server's
-- clock (ms).
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
local pos = 4
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
