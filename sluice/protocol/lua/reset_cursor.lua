-- reset_cursor: move a subscription's cursor to any position of its partition, back or
-- forward, in one atomic call (Pulsar's reset-cursor).  Afterwards every entry up to the
-- target is acknowledged and every entry after it is to be delivered (again), once.
-- KEYS[1] stream, KEYS[2] subs set, KEYS[3] cursor, KEYS[4] redeliver zset,
-- KEYS[5] permits hash, KEYS[6] waitp flag, KEYS[7] waitack flag
-- ARGV[1] subscription (group)
-- ARGV[2] target: an entry id (or "0-0", before every entry); "$" = the end of the stream
-- ARGV[3] anchor and ARGV[4] count: the caller counted ARGV[4] entries in (target, anchor]
--         (anchor = target and count 0 when it counted nothing); entries after the anchor
--         are counted here, so the group's lag (the backlog in stats) stays exact
-- ARGV[5] receiver queue key prefix ("sl:{P}:s:{S}:q:"), ARGV[6] wake channel,
-- ARGV[7] wake payload
-- The consumer group is made again at the target with the number of entries read up to it:
-- that drops every pending entry at once (those up to the target are acknowledged by it,
-- those after it are read again as new) and nothing scheduled for redelivery remains, so no
-- entry is handed out both as a redelivery and as new.  As Pulsar clears its consumers'
-- receiver queues on a reset, entries handed to consumers' queues and not yet fetched are
-- taken back and their permits returned; what a consumer fetched already still reaches the
-- application (at least once).  Dispatch, acks and nacks are Lua calls on the same keys, so
-- none of them runs in the middle of this one.
-- Returns {entries to deliver after the target, pending entries dropped, messages taken back
-- from receiver queues}, or the error "NOSUB".
local call = redis.call
local group = ARGV[1]
if call('SISMEMBER', KEYS[2], group) == 0 or call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NOSUB Subscription not found')
end

-- include lib/stream_ids.lua
-- include lib/entry_messages.lua
-- include lib/levels.lua

-- The receiver queues and the dormant flag are not among KEYS.  While a Redis Cluster migrates
-- this slot, one of them may already be on the new master (or, absent, be assumed there):
-- touching each one now, before anything is written, makes such a call fail as a whole (the
-- caller retries it) instead of half-way through, as dispatch.lua does.
local owners = call('HKEYS', KEYS[5])
local dormant = string.match(KEYS[1], '^sl:%b{}:') .. 'dormant'
for _, consumer in ipairs(owners) do call('EXISTS', ARGV[5] .. consumer) end
call('EXISTS', dormant)

local info = call('XINFO', 'STREAM', KEYS[1])
local stream = {}
for i = 1, #info, 2 do stream[info[i]] = info[i + 1] end
local length, added = tonumber(stream['length']), tonumber(stream['entries-added'])
local target = ARGV[2]
local after = 0
if target == '$' then
  target = stream['last-generated-id']
elseif length > 0 then
  local first = stream['first-entry'][1]
  if id_before(target, first) then
    after = length
  else
    -- Trimming removes the oldest entries only: none after the target went since the count.
    after = tonumber(ARGV[4])
    local from = ARGV[3]
    while true do
      local got = call('XRANGE', KEYS[1], '(' .. from, '+', 'COUNT', 1000)
      after = after + #got
      if #got < 1000 then break end
      from = got[#got][1]
    end
  end
end

local dropped = tonumber(call('XPENDING', KEYS[1], group)[1])
call('XGROUP', 'DESTROY', KEYS[1], group)
call('XGROUP', 'CREATE', KEYS[1], group, target, 'ENTRIESREAD', added - after)
call('SET', KEYS[3], target)
-- Level streams (lib/levels.lua): the group is made again on each at the same place (ids of
-- every stream sort together), counting there what lies after it.
for _, level in ipairs(side_levels(KEYS[1])) do
  local side = level_stream(KEYS[1], level)
  local side_info = call('XINFO', 'STREAM', side)
  local fields = {}
  for i = 1, #side_info, 2 do fields[side_info[i]] = side_info[i + 1] end
  local at, later = ARGV[2], 0
  if at == '$' then
    at = fields['last-generated-id']
  else
    local from = at
    while true do
      local got = call('XRANGE', side, '(' .. from, '+', 'COUNT', 1000)
      later = later + #got
      if #got < 1000 then break end
      from = got[#got][1]
    end
  end
  dropped = dropped + tonumber(call('XPENDING', side, group)[1])
  after = after + later
  call('XGROUP', 'DESTROY', side, group)
  call('XGROUP', 'CREATE', side, group, at, 'ENTRIESREAD',
    tonumber(fields['entries-added']) - later)
end
call('DEL', KEYS[4], string.sub(KEYS[4], 1, -10) .. 'delayed')
-- The priority index (dispatch.lua) lists pending entries of the group made again: gone too.
for level = 0, 9 do call('DEL', string.sub(KEYS[4], 1, -10) .. 'prio:' .. level) end

-- Receiver queues: take back what consumers have not fetched, give the permits back.
local returned = 0
for _, consumer in ipairs(owners) do
  local queue = ARGV[5] .. consumer
  local items = call('LRANGE', queue, 0, -1)
  if #items > 0 then
    local n = 0
    for _, item in ipairs(items) do
      local first, last = string.match(item, '^R(%S+) (%S+)$')
      if first then
        for _, entry in ipairs(call('XRANGE', stream_of(KEYS[1], first), first, last)) do
          n = n + entry_messages(entry[2])
        end
      else
        local ok, packet = pcall(cmsgpack.unpack, item)
        if ok and type(packet) == 'table' then
          for _, entry in ipairs(packet) do n = n + entry_messages(entry[2]) end
        end
      end
    end
    call('DEL', queue)
    call('HINCRBY', KEYS[5], consumer, n)
    returned = returned + n
  end
end
call('DEL', KEYS[6], KEYS[7])
call('DEL', dormant)
call('PUBLISH', ARGV[6], ARGV[7])
return {after, dropped, returned}
