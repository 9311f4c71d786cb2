-- quota_window (a piece of dispatch.lua and group_budget.lua, spliced in by
-- sluice.protocol.scripts): one fixed-window quota kept in six fields of a hash, named by a
-- prefix ('m' messages, 'b' bytes): pm and pp, the permits and period (ms) it was last
-- written with; ws, the start of its window; av, the permits left in it; lu and fl, kept for
-- the caller.  read_quota_window reads it as of `now` (ms of Redis time): the periods that
-- ended since refill it under the limit in force then (never above it), and a changed limit
-- keeps what the current window has used (the new permits less that, never below 0),
-- restarting the window at `now` when the period changed or the limit is not `relative`.
-- Nothing is written: the caller writes the fields f back when it takes permits.
local function read_quota_window(key, prefix, permits, period, relative, now)
  local f = {prefix .. 'pm', prefix .. 'pp', prefix .. 'ws', prefix .. 'av', prefix .. 'lu',
    prefix .. 'fl'}
  local s = redis.call('HMGET', key, f[1], f[2], f[3], f[4], f[5], f[6])
  local q = {key = key, f = f, p = prefix, pm = permits, pp = period}
  local opm, opp = tonumber(s[1]), tonumber(s[2])
  if not opm or not opp or opp <= 0 then
    q.ws, q.av, q.lu, q.fl = now, permits, -1, 0
    return q
  end
  q.ws, q.av, q.lu = tonumber(s[3]), tonumber(s[4]), tonumber(s[5]) or -1
  q.fl = tonumber(s[6]) or 0
  if now >= q.ws + opp then
    local passed = math.floor((now - q.ws) / opp)
    q.av = math.min(opm, q.av + passed * opm)
    q.ws = q.ws + passed * opp
  end
  if opm ~= permits or opp ~= period then
    if opp ~= period or not relative then q.ws = now end
    q.av = permits - math.min(opm - q.av, permits)
  end
  return q
end
