-- group_publish: a resource group's publish rate, one window for every partition and producer
-- of the group, in the group's own slot.  A producer whose partition is in a group that limits
-- publishing (sl:{P}:limits resourceGroupId, written by the owning worker) calls this before
-- produce.lua; the window is produce.lua's own (lib/publish_window.lua): at most the rate's
-- messages and payload bytes per window of one second.
-- KEYS[1] the group's publish window hash: e (end of the window, ms of Redis time), m and b
-- (messages and bytes taken in it)
-- ARGV[1] messages of the call (a batch entry counts its messages), ARGV[2] payload bytes,
-- ARGV[3] messages per second (0 = no limit), ARGV[4] bytes per second (0 = no limit)
-- Returns 1 (taken), or the error "PublishRateLimited <ms to wait> <what was used>" (nothing
-- taken: the producer waits and calls again, as for its partition's own publish rate).
-- include lib/publish_window.lua
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
local call_msgs, call_bytes = tonumber(ARGV[1]), tonumber(ARGV[2])
local rate_m, rate_b = tonumber(ARGV[3]) or 0, tonumber(ARGV[4]) or 0
if rate_m <= 0 and rate_b <= 0 then return 1 end
local refused = take_publish_window(KEYS[1], now_ms, call_msgs, call_bytes, rate_m, rate_b)
if refused then
  return redis.error_reply('PublishRateLimited ' .. refused ..
    ' of the resource group used in this second')
end
return 1
