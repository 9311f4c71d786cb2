-- group_publish: a resource group's publish rate, one window for every partition and producer
-- of the group, in the group's own slot.  A producer whose partition is in a group that limits
-- publishing (sl:{P}:limits resourceGroupId, written by the owning worker) calls this before
-- produce.lua, with the same rules as produce.lua's publish-rate window: at most the rate's
-- messages and payload bytes per window of one second; a window opens with the first call
-- after the previous one ended, so by T seconds after the first send at most
-- LIMIT x (floor(T) + 1) pass; a call larger than a whole window's budget passes only into an
-- empty window, which then lasts as many seconds as the call needs.
-- KEYS[1] the group's publish window hash: e (end of the window, ms of Redis time), m and b
-- (messages and bytes taken in it)
-- ARGV[1] messages of the call (a batch entry counts its messages), ARGV[2] payload bytes,
-- ARGV[3] messages per second (0 = no limit), ARGV[4] bytes per second (0 = no limit)
-- Returns 1 (taken), or the error "PublishRateLimited <ms to wait> <what was used>" (nothing
-- taken: the producer waits and calls again, as for its partition's own publish rate).
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
local call_msgs, call_bytes = tonumber(ARGV[1]), tonumber(ARGV[2])
local rate_m, rate_b = tonumber(ARGV[3]) or 0, tonumber(ARGV[4]) or 0
if rate_m <= 0 and rate_b <= 0 then return 1 end
local w = redis.call('HMGET', KEYS[1], 'e', 'm', 'b')
local ends, used_m, used_b = tonumber(w[1]), tonumber(w[2]) or 0, tonumber(w[3]) or 0
if not ends or now_ms >= ends then ends, used_m, used_b = now_ms + 1000, 0, 0 end
if (rate_m > 0 and used_m + call_msgs > rate_m) or (rate_b > 0 and used_b + call_bytes > rate_b) then
  if used_m > 0 or used_b > 0 then
    return redis.error_reply('PublishRateLimited ' .. (ends - now_ms) .. ' ' .. used_m ..
      ' of ' .. rate_m .. ' messages and ' .. used_b .. ' of ' .. rate_b ..
      ' bytes (0 = no limit) of the resource group used in this second')
  end
  local windows = 1
  if rate_m > 0 then windows = math.max(windows, math.ceil(call_msgs / rate_m)) end
  if rate_b > 0 then windows = math.max(windows, math.ceil(call_bytes / rate_b)) end
  ends = ends + (windows - 1) * 1000
end
redis.call('HSET', KEYS[1], 'e', ends, 'm', used_m + call_msgs, 'b', used_b + call_bytes)
redis.call('PEXPIREAT', KEYS[1], ends)
return 1
