-- peek: the Nth entry of a partition, counted from the oldest entry a subscription has not
-- acknowledged (Pulsar's peek-messages), or from the first or the last entry of the stream
-- (examine-message).
-- KEYS[1] stream, KEYS[2] subs set, KEYS[3] cursor
-- ARGV[1] "backlog" (needs ARGV[3]), "earliest" or "latest"; ARGV[2] N (1 = the first);
-- ARGV[3] subscription (group)
-- A subscription's unacknowledged entries are those delivered and pending (all at or before
-- the group's cursor) followed by those after the cursor, so they are walked in that order.
-- Returns {id, fields}, or {} when there is no Nth entry, or the error "NOSUB".
local call = redis.call
local mode, n = ARGV[1], tonumber(ARGV[2])
local CHUNK = 1000

-- The Nth entry of XRANGE (or XREVRANGE) from `from` towards `to`, read CHUNK at a time.
local function nth(command, from, to, left)
  while left > 0 do
    local got = call(command, KEYS[1], from, to, 'COUNT', math.min(left, CHUNK))
    if #got == 0 then return {} end
    if left <= #got then return got[left] end
    left = left - #got
    from = '(' .. got[#got][1]
  end
  return {}
end

if mode == 'earliest' then return nth('XRANGE', '-', '+', n) end
if mode == 'latest' then return nth('XREVRANGE', '+', '-', n) end

local group = ARGV[3]
if call('SISMEMBER', KEYS[2], group) == 0 or call('EXISTS', KEYS[1]) == 0 then
  return redis.error_reply('NOSUB Subscription not found')
end
local pending = tonumber(call('XPENDING', KEYS[1], group)[1])
if n > pending then
  return nth('XRANGE', '(' .. (call('GET', KEYS[3]) or '0-0'), '+', n - pending)
end
local start, left = '-', n
while true do
  local got = call('XPENDING', KEYS[1], group, start, '+', math.min(left, CHUNK))
  if #got == 0 then return {} end
  if left <= #got then
    local id = got[left][1]
    local found = call('XRANGE', KEYS[1], id, id)
    return found[1] or {}
  end
  left = left - #got
  start = '(' .. got[#got][1]
end
