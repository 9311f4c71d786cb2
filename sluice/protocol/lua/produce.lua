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
-- Level streams (lib/levels.lua): an entry of a priority L other than 4 goes to the stream
-- KEYS[1] .. ':' .. L, with an id "<ms>-1L<14 digits>" made here (after the level's last,
-- kept in the partition's levels hash), once the partition has a level stream, or when it
-- starts using them: the limits hash's priorityIndexOnly is not 1 and KEYS[2] counts no
-- priority entry in KEYS[1] itself (priority_entries).  A new level stream gets a consumer
-- group per subscription of the partition (its subs set), at its start, and KEYS[2] the
-- flag level_streams, which dispatch.lua reads.
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
-- include lib/levels.lua
local function padded(id)
  local ms, seq = id_parts(id)
  return string.format('%013d-%010d', ms, seq)
end
local function unpadded(member)
  local ms, seq = id_parts(member)
  -- Not "..": Lua writes a number of 15 digits or more as "1.1e+15" (ids of level streams).
  return string.format('%d-%d', ms, seq)
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
  -- With level streams (lib/levels.lua) a group's backlog is summed over every stream, and
  -- its position is per stream; each stream's entries are the index of its own level.
  local sides = side_levels(KEYS[1])
  local by_name = {}
  for _, stream in ipairs(#sides > 0 and streams_of(KEYS[1]) or {KEYS[1]}) do
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
      local info = {}
      for f = 1, #g, 2 do info[g[f]] = g[f + 1] end
      local lag = tonumber(info['lag'])
      if not lag then
        -- Unknown (deleted entries ahead of the group, or a group made at an id): the indexed
        -- entries after its last-delivered id (of this stream's level alone, with level
        -- streams).
        lag = 0
        local from = '(' .. padded(info['last-delivered-id'])
        if #sides > 0 then
          local level = stream == KEYS[1] and 4 or tonumber(string.match(stream, ':(%d)$'))
          lag = redis.call('ZLEXCOUNT', prefix .. 'pq:' .. level, from, '+')
        else
          for level = 0, 9 do
            lag = lag + redis.call('ZLEXCOUNT', prefix .. 'pq:' .. level, from, '+')
          end
        end
      end
      local g_at = by_name[info['name']]
      if not g_at then
        g_at = {name = info['name'], last = {}, read = {}, passed = {}, need = n_new - evict_limit}
        by_name[info['name']] = g_at
        groups[#groups + 1] = g_at
      end
      g_at.last[stream] = info['last-delivered-id']
      g_at.read[stream] = tonumber(info['entries-read'])
      g_at.passed[stream] = 0
      g_at.need = g_at.need + tonumber(info['pending']) + lag
    end
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
        local stream = stream_of(KEYS[1], id)
        -- Where the entry stands in each group: nil acknowledged (or gone), 'new' not read
        -- yet, 'held' read ahead, 'out' with a consumer.
        local states, out, anywhere, wanted, held_in = {}, false, false, false, {}
        for k, g in ipairs(groups) do
          local state = nil
          if g.last[stream] and id_before(g.last[stream], id) then
            state = 'new'
          elseif g.last[stream] then
            local p = redis.call('XPENDING', stream, g.name, id, id, 1)
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
          victims[#victims + 1] = {id, member, key, held_in, stream}
          for k, g in ipairs(groups) do
            if states[k] == 'new' then g.passed[stream] = g.passed[stream] + 1 end
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
  for _, name in ipairs(v[4]) do redis.call('XACK', v[5], name, v[1]) end
  redis.call('XDEL', v[5], v[1])
  redis.call('ZREM', v[3], v[2])
end
if #victims > 0 then
  redis.call('HINCRBY', KEYS[2], 'priority_evicted', #victims)
  -- A group's entries-read counter counts the entries deleted ahead of it as read, so its lag
  -- (entries added minus read: the backlog) stays exact once they are gone.
  for _, g in ipairs(groups) do
    for stream, passed in pairs(g.passed) do
      if passed > 0 and g.read[stream] then
        redis.call('XGROUP', 'SETID', stream, g.name, g.last[stream], 'ENTRIESREAD',
          g.read[stream] + passed)
      end
    end
  end
end
-- Level streams (lib/levels.lua): an entry of a priority other than 4 goes to its level's
-- stream once the partition has one, or when the partition starts using them: the limits
-- hash's priorityIndexOnly is not 1 and no entry of another priority is in its own stream
-- (priority_entries: those are dispatched through the priority index, docs/priority.md).
local use_levels = nil
local last_ids, made = {}, {}
-- Whether the partition keeps its priorities in level streams (read once a call).
local function levels_in_use()
  if use_levels == nil then
    local found = redis.call('HGETALL', levels_key(KEYS[1]))
    for f = 1, #found, 2 do last_ids[tonumber(found[f])] = found[f + 1] end
    use_levels = #found > 0 or (
      redis.call('HGET', limits, 'priorityIndexOnly') ~= '1'
      and not redis.call('HGET', KEYS[2], 'priority_entries'))
  end
  return use_levels
end
-- The id of a new entry of a level stream (a level other than 4).
local function level_entry(level)
  local last, ms, n = last_ids[level], now_ms, 0
  if last then
    local last_ms, last_n = string.match(last, '^(%d+)%-1%d(%d+)$')
    last_ms = tonumber(last_ms)
    if last_ms >= ms then ms, n = last_ms, tonumber(last_n) + 1 end
  elseif made[level] == nil then
    made[level] = true
  end
  local id = string.format('%d-1%d%014d', ms, level, n)
  last_ids[level] = id
  return id
end
local ids = {}
pos = 4
local msgs, bytes, batches, delayed, prioritized = 0, 0, 0, 0, 0
for i = 1, tonumber(ARGV[3]) do
  local pairs_count = tonumber(ARGV[pos])
  local args = {KEYS[1], '*', 't', now}
  local n, level, marked = 1, nil, false
  for j = 1, pairs_count do
    local field, value = ARGV[pos + 2 * j - 1], ARGV[pos + 2 * j]
    args[#args + 1] = field
    args[#args + 1] = value
    if field == 'd' then bytes = bytes + #value
    elseif field == 'n' then n = tonumber(value) batches = batches + 1
    elseif field == 'a' then delayed = delayed + 1
    elseif field == 'u' then
      marked = true
      -- Only an integer 0..9 is a priority (dispatch.lua reads anything else as 4).
      local p = tonumber(value)
      if p and p >= 0 and p <= 9 and p == math.floor(p) then level = p end
    end
  end
  msgs = msgs + n
  if not marked then
    -- The default priority: the partition's own stream.
  elseif not levels_in_use() then
    prioritized = prioritized + 1
  elseif level and level ~= 4 then
    args[1], args[2] = KEYS[1] .. ':' .. level, level_entry(level)
  end
  ids[i] = redis.call('XADD', unpack(args))
  if priorities then
    redis.call('ZADD', prefix .. 'pq:' .. priorities[i], 0, padded(ids[i]))
  end
  pos = pos + 1 + 2 * pairs_count
end
if use_levels then
  local fields = {}
  for level, id in pairs(last_ids) do
    fields[#fields + 1] = level
    fields[#fields + 1] = id
  end
  if #fields > 0 then redis.call('HSET', levels_key(KEYS[1]), unpack(fields)) end
  -- Every subscription has its consumer group on every stream of the partition: a new
  -- level stream holds only entries newer than each of them.
  local subs = nil
  -- Dispatch reads this flag with the others it reads of KEYS[2] (no command more for a
  -- partition without level streams).
  if next(made) then redis.call('HSET', KEYS[2], 'level_streams', 1) end
  for level, _ in pairs(made) do
    subs = subs or redis.call('SMEMBERS', prefix .. 'subs')
    for _, name in ipairs(subs) do
      redis.call('XGROUP', 'CREATE', KEYS[1] .. ':' .. level, name, '0', 'ENTRIESREAD', 0)
    end
  end
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
