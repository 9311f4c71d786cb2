-- skip: move a subscription past its oldest backlog (message TTL, backlog quota eviction).
-- KEYS[1] stream, KEYS[2] cursor, KEYS[3] redeliver zset, KEYS[4] subscription stats hash,
-- KEYS[5] partition lease
-- ARGV[1] subscription (group)
-- ARGV[2] cutoff: only entries with ids below this id go ("+" = no cutoff)
-- ARGV[3] most entries to skip in this call
-- ARGV[4] 1 = also acknowledge delivered, unacknowledged entries (eviction); 0 = only entries
--         never dispatched (TTL)
-- ARGV[5] stats hash field that counts the skipped messages ("expired" or "evicted")
-- ARGV[6] fencing token: the lease must hold it ("" = no ownership check)
-- ARGV[7] (optional) 1 = oldest first: with level streams, the undelivered entries too are
--         taken in id (arrival) order over every stream (message TTL, backlog eviction), not in
--         dispatch order (an admin's skip of the next N messages)
-- Delivered entries are older than undelivered ones (they are at or before the group's
-- cursor), so taking pending entries first and then undelivered ones skips oldest first.
-- A partition with level streams (lib/levels.lua) is skipped in the order peek.lua walks it:
-- the pending entries of every stream in id order, then the undelivered ones in dispatch
-- order, highest level first and in stream order within a level (the log for 4: its cursor
-- is KEYS[2], a level stream's its group's last-delivered id), or, for a Key_Shared
-- subscription (its "meta" hash next to KEYS[2] says so), every stream merged in id order;
-- the cutoff applies to every stream alike (ids of all of them sort together).  Each
-- stream's group keeps its entries-read counter, as the log's does.
-- Returns {entries, messages} skipped, or the error "FENCED".
local call = redis.call
local group, cutoff, budget = ARGV[1], ARGV[2], tonumber(ARGV[3])
if ARGV[6] ~= '' and call('GET', KEYS[5]) ~= ARGV[6] then
  return redis.error_reply('FENCED partition lease lost')
end
local upper = cutoff == '+' and '+' or '(' .. cutoff
local entries, messages = 0, 0

-- include lib/entry_messages.lua
-- include lib/levels.lua
-- include lib/level_merge.lua
local streams = streams_of(KEYS[1])

-- 1. Delivered but unacknowledged entries (eviction only).
if ARGV[4] == '1' and budget > 0 then
  local fetches, ids = {}, {}
  for k, stream in ipairs(streams) do
    ids[k] = {}
    fetches[k] = function(after, count)
      return call('XPENDING', stream, group, after and '(' .. after or '-', upper, count)
    end
  end
  local taken = merge_walk(fetches, budget, false, budget, function(p, k)
    ids[k][#ids[k] + 1] = p[1]
  end)
  for k, stream in ipairs(streams) do
    if #ids[k] > 0 then
      for _, id in ipairs(ids[k]) do
        local found = call('XRANGE', stream, id, id)
        messages = messages + (#found > 0 and entry_messages(found[1][2]) or 1)
      end
      call('XACK', stream, group, unpack(ids[k]))
      call('ZREM', KEYS[3], unpack(ids[k]))
      call('ZREM', string.sub(KEYS[3], 1, -10) .. 'delayed', unpack(ids[k]))
    end
  end
  entries = entries + taken
  budget = budget - taken
end

-- 2. Entries never dispatched: move the group's last-delivered id past them, on each stream
-- (from its group's position) highest level first, or, Key_Shared, merged in id order.
if budget > 0 then
  local fetches, passed = {}, {}
  for _, stream in ipairs(streams) do
    local fields = groups_by_name(stream)[group]
    local cursor = fields and fields['last-delivered-id']
    if stream == KEYS[1] then cursor = call('GET', KEYS[2]) or '0-0' end
    if cursor then
      fetches[#fetches + 1] = function(after, count)
        return call('XRANGE', stream, '(' .. (after or cursor), upper, 'COUNT', count)
      end
      passed[#passed + 1] = {stream = stream, fields = fields, n = 0}
    end
  end
  local function pass(entry, k)
    messages = messages + entry_messages(entry[2])
    passed[k].n, passed[k].last = passed[k].n + 1, entry[1]
  end
  if #fetches > 1 and (ARGV[7] == '1'
      or call('HGET', string.sub(KEYS[2], 1, -7) .. 'meta', 'type') == 'Key_Shared') then
    budget = budget - merge_walk(fetches, budget, false, budget, pass)
  else
    for k, fetch in ipairs(fetches) do
      if budget <= 0 then break end
      budget = budget - merge_walk({fetch}, budget, false, budget, function(entry)
        pass(entry, k)
      end)
    end
  end
  for _, p in ipairs(passed) do
    if p.n > 0 then
      -- Keep the group's entries-read counter valid, so XINFO GROUPS still reports the lag.
      local read = p.fields and p.fields['entries-read']
      if type(read) == 'number' then
        call('XGROUP', 'SETID', p.stream, group, p.last, 'ENTRIESREAD', read + p.n)
      else
        call('XGROUP', 'SETID', p.stream, group, p.last)
      end
      if p.stream == KEYS[1] then call('SET', KEYS[2], p.last) end
      entries = entries + p.n
    end
  end
end

if messages > 0 then call('HINCRBY', KEYS[4], ARGV[5], messages) end
return {entries, messages}
