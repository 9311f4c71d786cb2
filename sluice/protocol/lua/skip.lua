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
-- Delivered entries are older than undelivered ones (they are at or before the group's
-- cursor), so taking pending entries first and then undelivered ones skips oldest first.
-- Returns {entries, messages} skipped, or the error "FENCED".
local call = redis.call
local group, cutoff, budget = ARGV[1], ARGV[2], tonumber(ARGV[3])
if ARGV[6] ~= '' and call('GET', KEYS[5]) ~= ARGV[6] then
  return redis.error_reply('FENCED partition lease lost')
end
local upper = cutoff == '+' and '+' or '(' .. cutoff
local entries, messages = 0, 0

-- include lib/entry_messages.lua

-- 1. Delivered but unacknowledged entries (eviction only).
if ARGV[4] == '1' and budget > 0 then
  local pending = call('XPENDING', KEYS[1], group, '-', upper, budget)
  if #pending > 0 then
    local ids = {}
    for i, p in ipairs(pending) do
      ids[i] = p[1]
      local found = call('XRANGE', KEYS[1], p[1], p[1])
      messages = messages + (#found > 0 and entry_messages(found[1][2]) or 1)
    end
    call('XACK', KEYS[1], group, unpack(ids))
    call('ZREM', KEYS[3], unpack(ids))
    call('ZREM', string.sub(KEYS[3], 1, -10) .. 'delayed', unpack(ids))
    entries = entries + #ids
    budget = budget - #ids
  end
end

-- 2. Entries never dispatched: move the group's last-delivered id past them.
if budget > 0 then
  local cursor = call('GET', KEYS[2]) or '0-0'
  local fresh = call('XRANGE', KEYS[1], '(' .. cursor, upper, 'COUNT', budget)
  if #fresh > 0 then
    for _, entry in ipairs(fresh) do messages = messages + entry_messages(entry[2]) end
    local last = fresh[#fresh][1]
    -- Keep the group's entries-read counter valid, so XINFO GROUPS still reports the lag.
    local read = nil
    for _, info in ipairs(call('XINFO', 'GROUPS', KEYS[1])) do
      local fields = {}
      for i = 1, #info, 2 do fields[info[i]] = info[i + 1] end
      if fields['name'] == group then read = fields['entries-read'] end
    end
    if type(read) == 'number' then
      call('XGROUP', 'SETID', KEYS[1], group, last, 'ENTRIESREAD', read + #fresh)
    else
      call('XGROUP', 'SETID', KEYS[1], group, last)
    end
    call('SET', KEYS[2], last)
    entries = entries + #fresh
  end
end

if messages > 0 then call('HINCRBY', KEYS[4], ARGV[5], messages) end
return {entries, messages}
