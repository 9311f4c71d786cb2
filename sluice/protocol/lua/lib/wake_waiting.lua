-- wake_waiting (a piece of ack.lua, ack_cumulative.lua and flow.lua, spliced in by
-- sluice.protocol.scripts): after acks or permits that may let a dispatcher go on, delete
-- its wait flag and the partition's dormant flag (sl:{P}:dormant, from KEYS[1], a key of the
-- partition) and publish the wake when either was set.
local function wake_waiting(flag, channel, payload)
  local waiting = redis.call('DEL', flag) == 1
  if redis.call('DEL', string.match(KEYS[1], '^sl:%b{}:') .. 'dormant') == 1 or waiting then
    redis.call('PUBLISH', channel, payload)
  end
end
