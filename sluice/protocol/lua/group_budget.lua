-- group_budget: the dispatch limiter of one resource group, shared by every partition,
-- subscription and worker the group applies to, and its weighted split between the group's
-- members (the tenants, namespaces and topics attached to it).  Both keys are in the group's
-- own slot, so one atomic call decides for the whole group, on Redis's clock, on a single
-- server and on a cluster alike.  A dispatcher reserves here before each dispatch call (the
-- grant is the most that call may hand out) and settles afterwards with what it handed out
-- (the rest goes back to the period it was taken from, if that period is still running); a
-- settlement may ride on the next reservation (ARGV[10..15]).
-- KEYS[1] the group's limiter hash, KEYS[2] the group's members hash
-- ARGV[1]  member: the tenant, namespace or topic that brought the partition into the group
-- ARGV[2]  the member's weight (>= 1)
-- ARGV[3]  message permits per period (<= 0 = unlimited)
-- ARGV[4]  byte permits per period (<= 0 = unlimited)
-- ARGV[5]  period, ms
-- ARGV[6]  messages wanted (0 = settle only), ARGV[7] bytes wanted
-- ARGV[8]  1 = the member has more to send (a settle-only call: 0 = it sent all it had)
-- ARGV[9]  the clock in ms instead of Redis's TIME (for tests; "" = TIME)
-- ARGV[10..12] settle (optional): message period start of the reservation, messages reserved,
--          messages handed out; ARGV[13..15] the same for bytes
-- The limiter hash holds per dimension (prefix "m" messages, "b" bytes) the fields of
-- dispatch.lua's limiters (pm permits, pp period, ws period start, av quota left, lu last use,
-- fl how late the previous period was first used), with the same rules: a quota renews each
-- period but never above its permits, over-use is paid back by later periods, a period starts
-- with the first use after the previous one ended (or on its grid under steady load), and a
-- changed limit starts a new period at once, less what the interrupted period used.  So no
-- period of the group hands out more than its permits, whoever asks.
-- Fair split: a member is active when it asked within 1.5 periods, hungry while it has more
-- to send.  The active members that are not hungry keep what they used this period; the
-- rest of the period's permits is shared among the hungry ones in proportion to their
-- weights, and a member gets at most its share less what it used this period (rounded up),
-- paced: a tenth of its share at the period's start, growing to all of it three quarters of
-- the way through.
-- What an idle or satisfied member leaves is so shared among the others (work-conserving).
-- Members hash fields, per member M: "w|M" weight, "t|M" last ask (ms), "h|M" hungry (1/0),
-- "um|M" / "ub|M" messages / bytes used in the period "wm|M" / "wb|M" started.
-- Returns {granted messages (-1 = unlimited), granted bytes (-1 = unlimited), message period
-- start, byte period start, wait ms, why}: why 0 = granted, 1 = the group's quota is used
-- (wait until it renews), 2 = the member's share is used (ask again after wait ms).
local call = redis.call
local member, weight = ARGV[1], tonumber(ARGV[2])
local period = tonumber(ARGV[5])
local want = {m = tonumber(ARGV[6]), b = tonumber(ARGV[7])}
local now = tonumber(ARGV[9] or '')
if not now then
  local t = call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local TTL = 3600000

-- include lib/quota_window.lua
local function load(prefix, permits)
  if permits <= 0 then return nil end
  return read_quota_window(KEYS[1], prefix, permits, period, false, now)
end
local bm = load('m', tonumber(ARGV[3]))
local bb = load('b', tonumber(ARGV[4]))

-- Members, as name -> {field kind -> value}.
local members = {}
local raw = call('HGETALL', KEYS[2])
for i = 1, #raw, 2 do
  local kind, name = string.match(raw[i], '^(%a+)|(.*)$')
  if kind then
    local m = members[name]
    if not m then m = {}; members[name] = m end
    m[kind] = raw[i + 1]
  end
end
local me = members[member]
if not me then me = {}; members[member] = me end
me.w = tostring(weight)

local function used_of(m, b)
  if tonumber(m['w' .. b.p]) == b.ws then return tonumber(m['u' .. b.p]) or 0 end
  return 0
end
local function add_use(b, amount)
  me['u' .. b.p] = tostring(used_of(me, b) + amount)
  me['w' .. b.p] = tostring(b.ws)
end

-- Settle a previous reservation of this member.
local function settle(b, ws, reserved, used)
  if not b or not ws then return end
  if ws == b.ws then
    b.av = b.av + reserved - used
    add_use(b, used - reserved)
  elseif used > reserved then
    b.av = b.av - (used - reserved)  -- an entry's overshoot, paid by the current period
  end
end
if ARGV[10] then
  settle(bm, tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12]))
  settle(bb, tonumber(ARGV[13]), tonumber(ARGV[14]), tonumber(ARGV[15]))
end

local asking = want.m > 0 or want.b > 0
if asking then
  me.t = tostring(now)
  me.h = '1'
else
  me.h = ARGV[8] == '1' and '1' or '0'
end

-- A period's first use starts it (dispatch.lua's rule): on its grid when about as late as the
-- previous period's first use, else now.  Applied before the shares are computed, so the
-- pacing below counts from the period's real start.
local function open(b)
  if not b or b.av < b.pm then return end
  local late, tolerance = now - b.ws, math.min(50, b.pp / 20)
  if b.lu < b.ws - b.pp then
    b.ws, b.fl = now, 0
  else
    if late > math.max(tolerance, math.min(b.fl + tolerance, b.pp / 2)) then b.ws = now end
    b.fl = late
  end
end

-- What this member may take now in one dimension: amount, why, wait.  Shares are paced over
-- the first three quarters of the period (a tenth at once, all of it three quarters through),
-- so a member that starts a moment after another still gets its share of that period.
local horizon = period * 1.5
local function grant(b)
  if not b then return -1, 0, 0 end
  if b.av <= 0 then return 0, 1, b.ws + b.pp - now end
  local pool, total = b.pm, 0
  for name, m in pairs(members) do
    if name == member or (tonumber(m.t) or 0) >= now - horizon then
      if name == member or m.h == '1' then
        total = total + (tonumber(m.w) or 1)
      else
        pool = pool - used_of(m, b)
      end
    end
  end
  local paced = math.min(1, 0.1 + 1.2 * math.max(now - b.ws, 0) / b.pp)
  local left = math.ceil(pool * weight / total * paced - used_of(me, b) - 1e-9)
  if left <= 0 then
    return 0, 2, math.min(b.ws + b.pp - now, math.max(20, b.pp / 20))
  end
  return math.min(want[b.p], b.av, left), 0, 0
end

local function take(b, amount)
  if not b or amount <= 0 then return end
  b.av = b.av - amount
  b.lu = now
  add_use(b, amount)
end

local gm, gb, why, wait = -1, -1, 0, 0
if asking then
  local wm, wb, ym, yb
  open(bm)
  open(bb)
  gm, ym, wm = grant(bm)
  gb, yb, wb = grant(bb)
  if gm == 0 or gb == 0 then
    why = math.max(ym, yb)
    wait = math.max(wm, wb)
    if gm > 0 then gm = 0 end
    if gb > 0 then gb = 0 end
  else
    take(bm, gm)
    take(bb, gb)
  end
end

for _, b in ipairs({bm, bb}) do
  if b then
    call('HSET', KEYS[1], b.f[1], b.pm, b.f[2], b.pp, b.f[3], b.ws, b.f[4], b.av, b.f[5], b.lu,
      b.f[6], b.fl)
  end
end
call('PEXPIRE', KEYS[1], TTL)
local fields = {}
for _, kind in ipairs({'w', 't', 'h', 'um', 'wm', 'ub', 'wb'}) do
  if me[kind] then
    fields[#fields + 1] = kind .. '|' .. member
    fields[#fields + 1] = me[kind]
  end
end
call('HSET', KEYS[2], unpack(fields))
call('PEXPIRE', KEYS[2], TTL)
return {gm, gb, bm and bm.ws or 0, bb and bb.ws or 0, math.ceil(wait), why}
