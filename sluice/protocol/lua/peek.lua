-- peek: the Nth entry of a partition, counted from the oldest entry a subscription has not
-- acknowledged (Pulsar's peek-messages), or from the first or the last entry of the stream
-- (examine-message).
-- KEYS[1] stream, KEYS[2] subs set, KEYS[3] cursor
-- ARGV[1] "backlog" (needs ARGV[3]), "earliest" or "latest"; ARGV[2] N (1 = the first);
-- ARGV[3] subscription (group)
-- A subscription's unacknowledged entries are those delivered and pending (all at or before
-- the group's cursor) followed by those after the cursor, so they are walked in that order.
-- Without level streams both go in stream order, whatever their priority (entries read ahead
-- into the priority index, dispatch.lua's, are pending: they come first, in stream order).
-- A partition with level streams (lib/levels.lua) reads as one: "earliest" and "latest" walk
-- every stream in id (arrival) order; "backlog" walks the pending entries of every stream in
-- id order, then the entries after the group's cursor on each stream (the log's is KEYS[3], a
-- level stream's its group's last-delivered id) in dispatch order: highest level first and
-- in stream order within a level, or, for a Key_Shared subscription (its "meta" hash next to
-- KEYS[3] says so), every stream merged in id order, as dispatch.lua reads them.
-- Returns {id, fields}, or {} when there is no Nth entry, or the error "NOSUB".
-- include lib/levels.lua
-- include lib/level_merge.lua
local call = redis.call
local mode, n = ARGV[1], tonumber(ARGV[2])
local CHUNK = 1000
local streams = streams_of(KEYS[1])

-- The Nth entry of the rows fetches[k](after, count) answer, merged in id order (newest
-- first when reverse); {} when there is none, and how many were missing then.
local function nth(fetches, left, reverse)
  local walked, last = merge_walk(fetches, left, reverse, CHUNK)
  if walked < left or not last then return {}, left - walked end
  return last, 0
end
-- A stream's rows from `from` towards `to` (XRANGE, or XREVRANGE) as a source of nth.
local function rows(command, stream, from, to)
  return function(after, count)
    return call(command, stream, after and '(' .. after or from, to, 'COUNT', count)
  end
end

if mode == 'earliest' or mode == 'latest' then
  local fetches = {}
  for k, stream in ipairs(streams) do
    fetches[k] = mode == 'earliest' and rows('XRANGE', stream, '-', '+')
      or rows('XREVRANGE', stream, '+', '-')
  end
  return (nth(fetches, n, mode == 'latest'))
end

local group = ARGV[3]
if call('SISMEMBER', KEYS[2], group) == 0 or call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NOSUB Subscription not found')
end
local pending = 0
for _, stream in ipairs(streams) do
  pending = pending + tonumber(call('XPENDING', stream, group)[1])
end
if n <= pending then
  local fetches = {}
  for k, stream in ipairs(streams) do
    fetches[k] = function(after, count)
      return call('XPENDING', stream, group, after and '(' .. after or '-', '+', count)
    end
  end
  local found = nth(fetches, n, false)
  if not found[1] then return {} end
  return call('XRANGE', stream_of(KEYS[1], found[1]), found[1], found[1])[1] or {}
end
-- After the cursor, on each stream from its group's position.
local fetches = {}
for _, stream in ipairs(streams) do
  local cursor = nil
  if stream == KEYS[1] then
    cursor = call('GET', KEYS[3]) or '0-0'
  else
    cursor = groups_by_name(stream)[group]
    cursor = cursor and cursor['last-delivered-id']
  end
  if cursor then fetches[#fetches + 1] = rows('XRANGE', stream, '(' .. cursor, '+') end
end
local left = n - pending
if #fetches > 1
    and call('HGET', string.sub(KEYS[3], 1, -7) .. 'meta', 'type') == 'Key_Shared' then
  return (nth(fetches, left, false))
end
for _, fetch in ipairs(fetches) do
  local found
  found, left = nth({fetch}, left, false)
  if left == 0 then return found end
end
return {}
