-- publish_window (a piece of produce.lua and group_publish.lua, spliced in by
-- sluice.protocol.scripts): one publish-rate window of one second, a hash with e (its end, ms
-- of Redis time), m and b (messages and payload bytes taken in it).  A window opens with the
-- first call after the previous one ended, so by T seconds after the first send at most
-- LIMIT x (floor(T) + 1) pass; a call larger than a whole window's budget passes only into an
-- empty window, which then lasts as many seconds as the call needs.  Rates of 0 are no limit.
-- take_publish_window returns nil when the call was taken (and written), else the head of the
-- refusal: "<ms to wait> <m> of <rate> messages and <b> of <rate> bytes (0 = no limit)".
local function take_publish_window(window, now_ms, call_msgs, call_bytes, rate_m, rate_b)
  local w = redis.call('HMGET', window, 'e', 'm', 'b')
  local ends, used_m, used_b = tonumber(w[1]), tonumber(w[2]) or 0, tonumber(w[3]) or 0
  if not ends or now_ms >= ends then ends, used_m, used_b = now_ms + 1000, 0, 0 end
  if (rate_m > 0 and used_m + call_msgs > rate_m) or
      (rate_b > 0 and used_b + call_bytes > rate_b) then
    if used_m > 0 or used_b > 0 then
      return (ends - now_ms) .. ' ' .. used_m .. ' of ' .. rate_m .. ' messages and ' ..
        used_b .. ' of ' .. rate_b .. ' bytes (0 = no limit)'
    end
    local windows = 1
    if rate_m > 0 then windows = math.max(windows, math.ceil(call_msgs / rate_m)) end
    if rate_b > 0 then windows = math.max(windows, math.ceil(call_bytes / rate_b)) end
    ends = ends + (windows - 1) * 1000
  end
  redis.call('HSET', window, 'e', ends, 'm', used_m + call_msgs, 'b', used_b + call_bytes)
  redis.call('PEXPIREAT', window, ends)
  return nil
end
