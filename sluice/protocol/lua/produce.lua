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
-- "NotAllowed Exceeds max allowed delivery delay of <N> milliseconds" when an entry's
-- deliver-at time (field "a", ms) is more than the limits hash's delayedDeliveryMaxDelayInMillis
-- (N > 0: the delayedDelivery policy is active and limits the delay) ahead of the publish
-- time (Redis's clock), as Pulsar's broker refuses it.
-- Publish rate: at most publishThrottlingRateInMsg messages (a batch entry counts its "n") and
-- publishThrottlingRateInByte payload bytes per window of one second (limits hash; 0 or absent
-- = no limit).  A window opens with the first call after the previous one ended, so by T
-- seconds after the first send at most LIMIT x (floor(T) + 1) were written.  A call larger
-- than a whole window's budget is written only into an empty window, which then lasts as many
-- seconds as the call needs.  A changed limit applies to the next call; the window keeps what
-- it holds.  Refused calls are counted in KEYS[2]'s publish_throttled.
-- Publish time "t" is the server's clock (ms).
-- Lowest-priority eviction (limits hash priorityEvictionLimit = the backlog quota's
-- limitMessages plus one, 0 or absent = off): see "evict" below; refused calls answer
-- "TOO_MANY_REQUESTS lowest_priority_eviction\t<reason>" (the client raises as for
-- producer_exception) and are counted in KEYS[2]'s quota_rejected, evicted entries in its
-- priority_evicted.  While it is on, every entry is indexed by priority in the partition's
-- zsets "pq:<priority>" (score 0, member the id zero-padded "%013d-%010d", so oldest first).
-- include lib/publish_window.lua
local prefix = string.sub(KEYS[1], 1, -4)
local limits = KEYS[5] or (prefix .. 'limits')
local lim = redis.call('HMGET', limits, 'maxMessageSize', 'priorityEvictionLimit',
  'delayedDeliveryMaxDelayInMillis')
local max_size = tonumber(lim[1]) or 5242880
local evict_limit = (tonumber(lim[2]) or 0) - 1
local max_delay = tonumber(lim[3]) or 0
local latest_at = nil
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
    elseif field == 'n' then n = tonumber(value) or 1
    elseif field == 'a' and max_delay > 0 then
      local at = tonumber(value)
      if at and (latest_at == nil or at > latest_at) then latest_at = at end
    end
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
if latest_at then
  local clock = redis.call('TIME')
  if latest_at - (clock[1] * 1000 + math.floor(clock[2] / 1000)) > max_delay then
    return redis.error_reply('NotAllowed Exceeds max allowed delivery delay of ' ..
      max_delay .. ' milliseconds')
  end
end
if KEYS[4] then
  local quota = redis.call('GET', KEYS[4])
  if quota then
    redis.call('HINCRBY', KEYS[2], 'quota_rejected', 1)
    return redis.error_reply('TOO_MANY_REQUESTS ' .. quota)
  end
end
-- Priorities of the call's entries ("u", 4 without it).
local function entry_priorities()
  local out, at = {}, 4
  for i = 1, tonumber(ARGV[3]) do
    local pairs_count, p = tonumber(ARGV[at]), 4
    for j = 1, pairs_count do
      if ARGV[at + 2 * j - 1] == 'u' then p = tonumber(ARGV[at + 2 * j]) or 4 end
    end
    out[i] = p
    at = at + 1 + 2 * pairs_count
  end
  return out
end
-- include lib/stream_ids.lua
local function padded(id)
  local ms, seq = id_parts(id)
  return string.format('%013d-%010d', ms, seq)
end
local function unpadded(member)
  local ms, seq = id_parts(member)
  return ms .. '-' .. seq
end

-- evict: with lowest-priority eviction on, every subscription (consumer group) whose backlog
-- (pending + lag) plus this call's entries would pass the limit needs room: the oldest entry
-- of the lowest priority below the lowest of this call's, among the entries no consumer got
-- yet (after the group's last-delivered id, or read ahead for the priority index, "~held"),
-- and got by no consumer of any other group either, is deleted from the stream (and
-- acknowledged where it was read ahead).  If some group finds no such entry, the call is
-- refused and nothing changes.  Entries written before the policy was set are not indexed:
-- they count but are never evicted.
local priorities = evict_limit >= 0 and entry_priorities() or nil
local victims, groups = {}, {}
if priorities then
  local n_new, lowest_new = #priorities, 9
  for _, p in ipairs(priorities) do lowest_new = math.min(lowest_new, p) end
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    local info = {}
    for f = 1, #g, 2 do info[g[f]] = g[f + 1] end
    local lag = tonumber(info['lag'])
    if not lag then
      -- Unknown (deleted entries ahead of the group, or a group made at an id): the indexed
      -- entries after its last-delivered id.
      lag = 0
      local from = '(' .. padded(info['last-delivered-id'])
      for level = 0, 9 do
        lag = lag + redis.call('ZLEXCOUNT', prefix .. 'pq:' .. level, from, '+')
      end
    end
    groups[#groups + 1] = {
      name = info['name'], last = info['last-delivered-id'], read = tonumber(info['entries-read']),
      passed = 0,
      need = tonumber(info['pending']) + lag + n_new - evict_limit,
    }
  end
  local needing = 0
  for _, g in ipairs(groups) do if g.need > 0 then needing = needing + 1 end end
  local looked = 0
  for level = 0, lowest_new - 1 do
    local key = prefix .. 'pq:' .. level
    local offset = 0
    while needing > 0 and looked < 1000 do
      local members = redis.call('ZRANGE', key, offset, offset + 99)
      if #members == 0 then break end
      local stale = {}
      for _, member in ipairs(members) do
        looked = looked + 1
        local id = unpadded(member)
        -- Where the entry stands in each group: nil acknowledged (or gone), 'new' not read
        -- yet, 'held' read ahead, 'out' with a consumer.
        local states, out, anywhere, wanted, held_in = {}, false, false, false, {}
        for k, g in ipairs(groups) do
          local state = nil
          if id_before(g.last, id) then
            state = 'new'
          else
            local p = redis.call('XPENDING', KEYS[1], g.name, id, id, 1)
            if #p > 0 then state = p[1][2] == '~held' and 'held' or 'out' end
          end
          states[k] = state
          if state then anywhere = true end
          if state == 'out' then out = true end
          if state == 'held' then held_in[#held_in + 1] = g.name end
          if state and state ~= 'out' and g.need > 0 then wanted = true end
        end
        if not anywhere then
          stale[#stale + 1] = member
        elseif wanted and not out then
          victims[#victims + 1] = {id, member, key, held_in}
          for k, g in ipairs(groups) do
            if states[k] == 'new' then g.passed = g.passed + 1 end
            if states[k] and g.need > 0 then
              g.need = g.need - 1
              if g.need == 0 then needing = needing - 1 end
            end
          end
        end
        if needing == 0 then break end
      end
      if #stale > 0 then redis.call('ZREM', key, unpack(stale)) end
      offset = offset + #members - #stale
    end
    if needing == 0 or looked >= 1000 then break end
  end
  if needing > 0 then
    redis.call('HINCRBY', KEYS[2], 'quota_rejected', 1)
    return redis.error_reply('TOO_MANY_REQUESTS lowest_priority_eviction\tbacklog quota of ' ..
      evict_limit .. ' messages reached and no waiting message has a priority lower than ' ..
      lowest_new .. ' to evict (lowest_priority_eviction)')
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
  local refused = take_publish_window(window, now_ms, call_msgs, call_bytes, rate_m, rate_b)
  if refused then
    redis.call('HINCRBY', KEYS[2], 'publish_throttled', 1)
    return redis.error_reply('PublishRateLimited ' .. refused .. ' used in this second')
  end
end
for _, v in ipairs(victims) do
  for _, name in ipairs(v[4]) do redis.call('XACK', KEYS[1], name, v[1]) end
  redis.call('XDEL', KEYS[1], v[1])
  redis.call('ZREM', v[3], v[2])
end
if #victims > 0 then
  redis.call('HINCRBY', KEYS[2], 'priority_evicted', #victims)
  -- A group's entries-read counter counts the entries deleted ahead of it as read, so its lag
  -- (entries added minus read: the backlog) stays exact once they are gone.
  for _, g in ipairs(groups) do
    if g.passed > 0 and g.read then
      redis.call('XGROUP', 'SETID', KEYS[1], g.name, g.last, 'ENTRIESREAD', g.read + g.passed)
    end
  end
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
  if priorities then
    redis.call('ZADD', prefix .. 'pq:' .. priorities[i], 0, padded(ids[i]))
  end
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
