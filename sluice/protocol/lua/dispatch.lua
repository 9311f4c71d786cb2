-- dispatch: hand entries of one subscription to its consumers' receiver queues, within the
-- budgets of every limiter, redeliveries first.  The TOPIC and SUBSCRIPTION limiters live here,
-- in the partition's slot: their quotas are checked and charged in the same atomic call that
-- hands entries out, on Redis's clock, so no reordering, restart or change of owner can
-- oversell a period.  The BROKER limiter belongs to the worker process, which reserves a
-- budget on it before the call and settles it with what this returns.
-- KEYS[1] stream, KEYS[2] cursor, KEYS[3] permits hash, KEYS[4] redeliver zset,
-- KEYS[5] subscription stats hash, KEYS[6] partition idle set, KEYS[7] waitp flag,
-- KEYS[8] partition lease, KEYS[9] partition stats hash, KEYS[10] waitack flag,
-- KEYS[11] TOPIC limiter hash, KEYS[12] SUBSCRIPTION limiter hash
-- ARGV[1]  subscription (group name)
-- ARGV[2]  queue key prefix ("sl:{P}:s:{S}:q:")
-- ARGV[3]  now, ms (the caller's clock; redelivery due times are on it)
-- ARGV[4]  max entries (dispatcherMaxReadBatchSize)
-- ARGV[5]  BROKER message budget in units (messages, or entries if ARGV[8] = 1; -1 = none)
-- ARGV[6]  BROKER byte budget (-1 = none)
-- ARGV[7]  read size cap in bytes (dispatcherMaxReadSizeBytes; at least one entry is read)
-- ARGV[8]  1 = count entries, not messages, against the message budgets
-- ARGV[9]  active consumer for Exclusive/Failover, "" for Shared (round robin)
-- ARGV[10] round-robin chunk per consumer (dispatcherMaxRoundRobinBatchSize)
-- ARGV[11] round-robin start offset
-- ARGV[12] 1 = a caught-up subscription is not throttled (budgets ignored, nothing charged)
-- ARGV[13] fencing token: the lease must hold it ("" = no ownership check)
-- ARGV[14] max unacked entries of the subscription (0 = not checked)
-- ARGV[15] max unacked entries per consumer (0 = not checked)
-- ARGV[16..18] TOPIC limit: message permits, byte permits (<= 0 = unlimited), period (s)
-- ARGV[19..21] SUBSCRIPTION limit: message permits, byte permits, period (s)
-- ARGV[22], ARGV[23] 1 = the TOPIC / SUBSCRIPTION limit follows the publish rate (relative)
-- ARGV[24] reads per call: the fast path may read up to this many times max entries (each
--          XREADGROUP reads at most max entries; the read size cap applies per read)
-- ARGV[25] the limiters' clock in ms instead of Redis's TIME (for tests, and dispatch_many.lua's
--          one reading of TIME for its run; "" or absent = TIME)
-- ARGV[26] delayed delivery (optional): -1 = deliver every entry at once, else the margin in ms
--          (delayedDeliveryTickTimeMillis, 0 when strict): a new entry whose deliver-at field
--          "a" minus the margin is still ahead of now is not handed out but held: read into the
--          group for the holder consumer "~held" and scheduled in the redeliver zset at "a"
--          minus the margin, uncharged.  When due it goes out like a redelivery (charged then)
--          but as a first delivery (delivery count 1, not counted as redelivered).  Held entries
--          do not count against the max-unacked limits.  Only for Shared (ARGV[9] = "").
--          An entry held for its time is also in the subscription's "delayed" zset (next to
--          KEYS[4], same score) until it comes due and is handed on: the entries of both are
--          the stats' msgDelayed (stats_live.lua).
-- ARGV[27] Key_Shared (optional): "1" = entries go by key (see "Key_Shared" below; KEYS[13]
--          the subscription's key-shared state hash, KEYS[14] its consumer info hash)
-- ARGV[28] priority look-ahead (optional, default 10000): see "Priority" below
-- ARGV[29] starvation guard (optional, default 0 = strict priority): every N-th message handed
--          out of the priority index is the oldest one at the head of a list, whatever its
--          priority (the turn is kept in KEYS[5] "prio_turn")
-- ARGV[30] (optional, default 0) the limiters the caller's previous call of this subscription
--          left without quota (its exhausted flags, below): demand was waiting for their
--          renewal, so a period of theirs first used late by the caller's own delay stays on
--          its grid up to half a period late, unless Redis restarted since it was spent
--          (see "Limiter hashes")
-- Priority: while the partition holds entries of a priority other than the default (field
-- "u", 0..9, absent = 4; counted as priority_entries in KEYS[9]), a Shared, Exclusive or
-- Failover subscription reads new entries ahead into the group for the holder "~held"
-- (uncharged, up to the look-ahead counted with what is indexed already, and per call up to
-- the call's read cap in payload bytes: the next call goes on) and indexes them in
-- the subscription's lists "prio:<priority>" (next to KEYS[4]), one per priority, members
-- "<id>:<payload size>:<messages>" in the order they were read (stream order).  Entries go
-- out from the highest non-empty list first, as first deliveries (delivery count 1, claimed
-- in one XCLAIM per consumer, which returns them, sent as a packet like redeliveries), under
-- the same budgets; redeliveries still go first.  Under strict priority (ARGV[29] = 0) an
-- entry read and handed out in the same call is never indexed: it goes out with the fields it
-- was read with, and the call's first read is for the consumer round robin picks first (only
-- what it may take; what it does not take is claimed for the holder, what another consumer
-- takes for that one, JUSTID).  A delayed entry read ahead is held as before, and
-- joins the index when it comes due.  Entries of the index count in msgBacklog (pending) and
-- not against max-unacked.  Per level, messages handed out are counted in KEYS[5] "out_p<L>".
-- Key_Shared ignores priorities (stream order per key).
-- Key_Shared: an entry's key is its ordering key "o", else its partition key "k" (a batch entry
-- carries its first message's); its slot is murmur3_32(key) mod 65536.  Each slot belongs to
-- one consumer: by consistent hashing of the consumer ids (100 points each on the 0..65535
-- ring, AUTO_SPLIT), or by the ranges consumers declared (STICKY; a slot nobody declared
-- waits).  The ring is rebuilt when the registered consumers change and kept in KEYS[13] (m:
-- the consumers it was built for, r: "end owner ..." pairs, owner indexing m, 0 = nobody).
-- A consumer that joins while entries are out with others is "recently joined" (Pulsar's
-- rule, made strict): until no registered consumer holds an entry at or before the last one
-- pending when it joined (KEYS[13] "j:<consumer>"), it gets no keyed entry at all, so a key
-- that moved to it cannot overtake its earlier messages still out with the consumer it moved
-- from (what waits meanwhile is held, and goes to it in stream order afterwards).  An entry whose
-- owner cannot take it (no permits, max unacked, recently joined) is held (like a delayed one,
-- due at once) and its slot is blocked for the rest of the call, so no later entry of that
-- key passes it; due entries go first, in stream order.  Entries without a key go round robin.
-- One registered consumer owning the whole ring, not recently joined, with nothing held:
-- every entry is its in stream order, so the subscription takes the fast path (2a).
-- While 10 x max entries are held, no new entry is read past one that must wait.
-- Limiter hashes hold per dimension (prefix "m" messages, "b" bytes): pm permits, pp period
-- (ms), ws start of the current period (ms, Redis time), av quota left in it, lu last use.
-- A quota renews each period but never above its permits (unused quota is not saved up); a
-- negative balance (the one-entry overshoot of a byte limit) is paid back by later periods.
-- A period starts with the first entry handed out after the previous one ended: a quota
-- still whole when it is used after a whole unused period, or later into its own than a
-- twentieth of a period (at most 50 ms) beyond how late the previous period was first used
-- (fl: a busy worker serves its subscriptions in the same order each period; at most half a
-- period), starts that period now; a quota the caller's previous call found spent (ARGV[30]:
-- the subscription was waiting for this renewal, and whatever made the call late was the
-- server's own delay, not a quiet spell) keeps its grid up to half a period late, unless the
-- Redis server restarted since that quota was last used (its uptime says so).  So the first
-- entry after a quiet spell, an outage or a new subscription opens a fresh period, while under steady load
-- (used as each period begins, give or take a late wake-up) the periods stay back to back
-- and do not drift.  A changed limit starts a new period at
-- once, less what the interrupted period used (at most the whole new quota: a lowered limit
-- never stalls dispatch for more than one period), so from the moment of a change every
-- period holds at most the new limit.  A relative limit, which moves with the publish rate,
-- keeps its periods when only its value moves.
-- Max-unacked limits count pending entries (XPENDING); only new entries are held back by the
-- subscription limit (redeliveries are already pending), a consumer at its limit gets nothing.
-- Budgets are checked before each entry, so the last entry may overshoot a byte budget only.
-- What a consumer may take goes to its receiver queue as one element per run: new entries,
-- which are consecutive in the stream, as the notice "R<first id> <last id>" (the consumer
-- reads them itself with XRANGE, so large payloads are not copied through here) or, for a
-- run of the fast path (2a) of at most PACKET_BYTES payload bytes, as the packet msgpack
-- [[id, fields], ...] of the entries themselves (first deliveries); redeliveries as a packet
-- msgpack [[id, fields, delivery count], ...].
-- Returns {entries, messages, bytes, redelivered, reason, unthrottled, next_due_ms, units,
-- unacked, exhausted, wait_ms} where reason is 0 more may follow, 1 no data, 2 no permits,
-- 3 message budget, 4 byte budget, 5 max unacked reached (the waitack flag is set; an ack
-- wakes the worker); unacked is the subscription's pending count afterwards (-1 when limits
-- were not checked); exhausted flags the limiters left without quota (1 TOPIC messages,
-- 2 TOPIC bytes, 4 SUBSCRIPTION messages, 8 SUBSCRIPTION bytes) and wait_ms is how long until
-- all of them have quota again; or the error "FENCED" when the caller no longer owns the
-- partition.
local call = redis.call
local group, qprefix, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local max_entries, msg_budget, byte_budget = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local read_cap, count_entries = tonumber(ARGV[7]), ARGV[8] == '1'
local active, rr_chunk, rr_offset = ARGV[9], tonumber(ARGV[10]), tonumber(ARGV[11])
local PACKET_BYTES = 524288  -- a fast-path run of at most this many payload bytes goes whole
local key_shared = ARGV[27] == '1' and active == ''
local margin = tonumber(ARGV[26] or '-1') or -1
local delaying = margin >= 0 and active == ''
local renewing = tonumber(ARGV[30] or '0') or 0
if ARGV[13] ~= '' and call('GET', KEYS[8]) ~= ARGV[13] then
  return redis.error_reply('FENCED partition lease lost')
end

-- The TOPIC and SUBSCRIPTION quotas, on Redis's clock (ms).
local tnow = tonumber(ARGV[25] or '')
if not tnow then
  local clock = call('TIME')
  tnow = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
end
-- include lib/quota_window.lua
-- include lib/levels.lua
local buckets = {}
local function bucket(key, prefix, flag, permits, period, relative)
  if permits <= 0 then return end
  local b = read_quota_window(key, prefix, permits, period, relative, tnow)
  b.flag = flag
  buckets[#buckets + 1] = b
  return b
end
local period_t, period_s = tonumber(ARGV[18]) * 1000, tonumber(ARGV[21]) * 1000
local rel_t, rel_s = ARGV[22] == '1', ARGV[23] == '1'
local tm = bucket(KEYS[11], 'm', 1, tonumber(ARGV[16]), period_t, rel_t)
local tb = bucket(KEYS[11], 'b', 2, tonumber(ARGV[17]), period_t, rel_t)
local sm = bucket(KEYS[12], 'm', 4, tonumber(ARGV[19]), period_s, rel_s)
local sb = bucket(KEYS[12], 'b', 8, tonumber(ARGV[20]), period_s, rel_s)
local function tighter(budget, b)
  if not b then return budget end
  local left = math.max(b.av, 0)
  if budget < 0 or left < budget then return left end
  return budget
end
msg_budget = tighter(tighter(msg_budget, tm), sm)
byte_budget = tighter(tighter(byte_budget, tb), sb)

-- Whether this Redis server started after `since` (ms of Redis time), from its clock and
-- uptime (read once, only for a late renewal): a quota spent before a restart waited for the
-- restart, not for the caller, so its period starts at its first use after it.
local started_ms = nil
local function started_after(since)
  if not started_ms then
    local up = string.match(call('INFO', 'server'), 'uptime_in_seconds:(%d+)')
    local clock = call('TIME')
    started_ms = tonumber(clock[1]) * 1000 - (tonumber(up) or 0) * 1000
  end
  return started_ms > since
end

-- Charge what went out (nothing when a caught-up subscription was not throttled) and report
-- the limiters left without quota: {exhausted flags, ms until all of them renew}.
local function settle(used_units, used_bytes, free)
  local exhausted, wait = 0, 0
  for _, b in ipairs(buckets) do
    local used = (b.flag == 1 or b.flag == 4) and used_units or used_bytes
    if used > 0 and not free then
      if b.av >= b.pm then
        -- The period's first use: on its grid when about as late as the previous period's
        -- first use (a busy worker serves its subscriptions in the same order each period),
        -- else (a quiet spell, an outage) the period starts now.
        local late, tolerance = tnow - b.ws, math.min(50, b.pp / 20)
        if b.lu < b.ws - b.pp then
          b.ws, b.fl = tnow, 0
        else
          local keep = math.max(tolerance, math.min(b.fl + tolerance, b.pp / 2))
          if late > keep and bit.band(renewing, b.flag) ~= 0 and not started_after(b.lu) then
            keep = b.pp / 2
          end
          if late > keep then
            b.ws = tnow
          end
          b.fl = late
        end
      end
      b.av = b.av - used
      b.lu = tnow
      call('HSET', b.key, b.f[1], b.pm, b.f[2], b.pp, b.f[3], b.ws, b.f[4], b.av, b.f[5], b.lu,
        b.f[6], b.fl)
    end
    if b.av <= 0 then
      exhausted = exhausted + b.flag
      wait = math.max(wait, b.ws + b.pp - tnow)
    end
  end
  return exhausted, math.ceil(wait)
end

-- The payload bytes of entries as XREADGROUP returned them (one message each: field 'd',
-- first or after the others).
local function payload_bytes(got)
  local size = 0
  for k = 1, #got do
    local fields = got[k][2]
    if fields[3] == 'd' then
      size = size + #fields[4]
    else
      for f = 1, #fields, 2 do
        if fields[f] == 'd' then size = size + #fields[f + 1] break end
      end
    end
  end
  return size
end

-- Lean path: the call a renewal of a slow subscription makes (its message quota alone binds
-- and one read takes all of it) with nothing else to do: no byte budget, no max-unacked
-- check, not Key_Shared, no batch, priority or (when delaying) delayed entries in the
-- partition, no redelivery due, and a first consumer in round-robin order whose permits
-- and chunk exceed the budget.  It makes the fast path's one XREADGROUP and writes what
-- the full path would, with fewer commands (the redeliver zset read once, the cursor not
-- read) and without building the rest of the script's functions.  Anything else (found
-- before the first write) returns nil: the full path runs as if this had not been tried.
local function lean()
  if byte_budget >= 0 or msg_budget < 1 or ARGV[12] == '1' or key_shared
    or tonumber(ARGV[14] or '0') > 0 or tonumber(ARGV[15] or '0') > 0 then
    return nil
  end
  local flags = call('HMGET', KEYS[9], 'batch_entries', 'delayed_entries', 'priority_entries',
    'level_streams')
  if flags[1] or flags[3] or (delaying and flags[2]) or flags[4] then return nil end
  local first = call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
  local due_next = -1
  if #first > 0 then
    due_next = tonumber(first[2])
    if due_next <= now then return nil end
  end
  -- The consumers with permits in round-robin order, as the full path orders them.
  local ids, chunk = {}, rr_chunk
  local taker, left
  if active ~= '' then
    local p = tonumber(call('HGET', KEYS[3], active) or '0')
    if p > 0 then ids[1], taker, left = active, active, p end
  else
    local flat = call('HGETALL', KEYS[3])
    local permits = {}
    for i = 1, #flat, 2 do
      local p = tonumber(flat[i + 1])
      if p > 0 then
        ids[#ids + 1] = flat[i]
        permits[flat[i]] = p
      end
    end
    if #ids == 1 then chunk = max_entries end
    if #ids > 0 then
      table.sort(ids)
      taker = ids[(rr_offset % #ids) + 1]
      left = permits[taker]
    end
  end
  local reads = math.max(tonumber(ARGV[24] or '1') or 1, 1)
  local want = msg_budget
  if not taker or want >= left or want > chunk or want > max_entries
    or want > max_entries * reads then
    return nil
  end
  for i = 1, #ids do call('EXISTS', qprefix .. ids[i]) end
  local reply = call('XREADGROUP', 'GROUP', group, taker, 'COUNT', want, 'STREAMS', KEYS[1], '>')
  local got = reply and reply[1] and reply[1][2] or {}
  local n = #got
  local size = payload_bytes(got)
  local reason = 3
  if n == 0 then
    call('SET', KEYS[2], call('GET', KEYS[2]) or '0-0')
  else
    if size > read_cap * reads or n >= max_entries * reads then reason = 0 end
    local cursor = got[n][1]
    if size <= PACKET_BYTES then
      call('RPUSH', qprefix .. taker, cmsgpack.pack(got))
    else
      call('RPUSH', qprefix .. taker, 'R' .. got[1][1] .. ' ' .. cursor)
    end
    call('SET', KEYS[2], cursor)
  end
  if n < want then
    -- Everything available was handed out: ask producers to wake us.
    reason = 0
    call('SADD', KEYS[6], group)
    if n == 0 then reason = 1 end
  end
  if n > 0 then
    call('HINCRBY', KEYS[3], taker, -n)
    call('HINCRBY', KEYS[5], 'msg_out', n)
    call('HINCRBY', KEYS[5], 'bytes_out', size)
  end
  local exhausted, wait_ms = settle(n, size, false)
  return {n, n, size, 0, reason, 0, due_next, n, -1, exhausted, wait_ms}
end
local lean_reply = lean()
if lean_reply then return lean_reply end

-- What the partition holds (produce.lua counts it in KEYS[9]): batch entries, delayed ones,
-- entries of another priority than 4 in its own stream (the priority index), level streams.
local pflags = call('HMGET', KEYS[9], 'batch_entries', 'delayed_entries', 'priority_entries',
  'level_streams')
-- Level streams (lib/levels.lua): every stream of the partition, highest level first.
local levels_on = pflags[4] and true or false
local level_streams = levels_on and streams_of(KEYS[1]) or {KEYS[1]}

local HOLDER = '~held'
local PRIO = string.sub(KEYS[4], 1, -10) .. 'prio:'
local DELAYED = string.sub(KEYS[4], 1, -10) .. 'delayed'
local lookahead = tonumber(ARGV[28] or '') or 10000
local oldest_every = tonumber(ARGV[29] or '') or 0

-- Stream ids in stream order.
local function id_parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  return tonumber(ms) or 0, tonumber(seq) or 0
end
local function id_lt(a, b)
  local am, as = id_parts(a)
  local bm, bs = id_parts(b)
  return am < bm or (am == bm and as < bs)
end
-- XPENDING's summary of the group, over every stream of the partition.
local function pending_summary()
  if not levels_on then return call('XPENDING', KEYS[1], group) end
  return pending_over(level_streams, group, false)
end

-- murmur3_32 (seed 0) of a string, as an unsigned number.  The arithmetic is on signed 32-bit
-- integers (Lua BitOp): a product of a 32-bit and a 16-bit number stays exact in a double, so
-- imul splits its constant into 16-bit halves and wraps with bit.tobit.
local tobit, bor, bxor, lshift, rshift = bit.tobit, bit.bor, bit.bxor, bit.lshift, bit.rshift
local function imul(a, b)
  local bl = b % 65536
  return tobit(tobit(a * bl) + lshift(tobit(a * ((b - bl) / 65536)), 16))
end
local function rotl32(x, r) return bor(lshift(x, r), rshift(x, 32 - r)) end
local function murmur3(text)
  local h, len = 0, #text
  local blocks = math.floor(len / 4)
  local byte = string.byte
  for b = 0, blocks - 1 do
    local b1, b2, b3, b4 = byte(text, b * 4 + 1, b * 4 + 4)
    local k = imul(rotl32(imul(b1 + b2 * 256 + b3 * 65536 + b4 * 16777216, 0xcc9e2d51), 15),
      0x1b873593)
    h = rotl32(bxor(h, k), 13)
    h = tobit(imul(h, 5) + 0xe6546b64)
  end
  local rest = len - blocks * 4
  if rest > 0 then
    local b1, b2, b3 = byte(text, blocks * 4 + 1, blocks * 4 + 3)
    local k = b1
    if rest >= 2 then k = k + b2 * 256 end
    if rest >= 3 then k = k + b3 * 65536 end
    h = bxor(h, imul(rotl32(imul(k, 0xcc9e2d51), 15), 0x1b873593))
  end
  h = bxor(h, len)
  h = imul(bxor(h, rshift(h, 16)), 0x85ebca6b)
  h = imul(bxor(h, rshift(h, 13)), 0xc2b2ae35)
  h = bxor(h, rshift(h, 16))
  if h < 0 then h = h + 4294967296 end
  return h
end

-- Max-unacked limits: room left for new pending entries (-1 = unlimited).
local sub_limit, consumer_limit = tonumber(ARGV[14] or '0'), tonumber(ARGV[15] or '0')
local sub_room, pending_total = -1, -1
local consumer_pending = {}
if sub_limit > 0 or consumer_limit > 0 then
  local summary = pending_summary()
  pending_total = tonumber(summary[1])
  if summary[4] then
    for _, pair in ipairs(summary[4]) do consumer_pending[pair[1]] = tonumber(pair[2]) end
  end
  -- Held (delayed) entries are not out with any consumer.
  pending_total = pending_total - (consumer_pending[HOLDER] or 0)
  if sub_limit > 0 then sub_room = math.max(sub_limit - pending_total, 0) end
end
local function room_of(id)
  if consumer_limit <= 0 then return -1 end
  return math.max(consumer_limit - (consumer_pending[id] or 0), 0)
end

-- Consumers with permits, in round-robin order:
-- {id, permits, taken this round, used, unacked room (-1 = unlimited)}.
local consumers = {}
local registered = {}  -- every registered consumer, with permits or not (Shared, Key_Shared)
if active ~= '' then
  local p = tonumber(call('HGET', KEYS[3], active) or '0')
  if p > 0 then consumers[1] = {active, p, 0, 0, room_of(active)} end
else
  local flat = call('HGETALL', KEYS[3])
  local all = {}
  for i = 1, #flat, 2 do
    local p = tonumber(flat[i + 1])
    registered[#registered + 1] = flat[i]
    if p > 0 then all[#all + 1] = {flat[i], p, 0, 0, room_of(flat[i])} end
  end
  table.sort(all, function(a, b) return a[1] < b[1] end)
  for i = 1, #all do consumers[i] = all[((i - 1 + rr_offset) % #all) + 1] end
  -- Round robin needs at least two consumers; one takes whole reads.
  if #all == 1 then rr_chunk = max_entries end
end
-- The receiver queues are not among KEYS.  While a Redis Cluster migrates this slot, a queue
-- may already be on the new master (or, empty, be assumed there): touching each one now,
-- before anything is written, makes such a call fail as a whole (the worker retries it)
-- instead of half-way through.
for i = 1, #consumers do call('EXISTS', qprefix .. consumers[i][1]) end

local function next_due()
  local first = call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
  if #first == 0 then return -1 end
  return tonumber(first[2])
end
-- The next due time after now: what is due already waits for permits or acks, which wake
-- the worker.
local function next_due_later()
  local first = call('ZRANGEBYSCORE', KEYS[4], '(' .. now, '+inf', 'LIMIT', 0, 1, 'WITHSCORES')
  if #first == 0 then return -1 end
  return tonumber(first[2])
end

if #consumers == 0 then
  call('SET', KEYS[7], '1')
  return {0, 0, 0, 0, 2, 0, next_due_later(), 0, pending_total, 0, 0}
end

local entries, messages, units, bytes, redelivered, reason = 0, 0, 0, 0, 0, 0
local cursor = call('GET', KEYS[2]) or '0-0'

-- Key_Shared: the ring, the recently joined consumers, the slot of an entry.
local ring_ends, ring_owner, joined, by_id, blocked = {}, {}, {}, {}, {}
local held_any = false
local slots = {}
-- When every slot of the ring has the same owner (AUTO_SPLIT with one registered consumer,
-- or STICKY ranges of one consumer covering the whole ring), which owner a key has does not
-- depend on its slot: the key is not hashed, and every keyed entry has the one slot 0.  The
-- same entries go and wait as with their own slots: whether the owner can take an entry only
-- falls within a call (permits, unacked room) or stays (recently joined), so once one keyed
-- entry waits, every later one would too.
local sole_owner = nil
local function key_slot(fields)
  local key, okey
  for f = 1, #fields, 2 do
    local name = fields[f]
    if name == 'o' then okey = fields[f + 1] elseif name == 'k' then key = fields[f + 1] end
  end
  key = okey or key
  if not key or key == '' then return nil end
  if sole_owner then return 0 end
  local slot = slots[key]
  if not slot then
    slot = murmur3(key) % 65536
    slots[key] = slot
  end
  return slot
end
local function build_ring()
  local infos = {}
  local sticky = false
  for idx, id in ipairs(registered) do
    local raw = call('HGET', KEYS[14], id)
    local ok, info = pcall(cjson.decode, raw or '{}')
    if not ok or type(info) ~= 'table' then info = {} end
    infos[idx] = info
    if type(info.ranges) == 'table' and #info.ranges > 0 then sticky = true end
  end
  local parts = {}
  if sticky then
    local ranges = {}
    for idx, info in ipairs(infos) do
      if type(info.ranges) == 'table' then
        for _, r in ipairs(info.ranges) do ranges[#ranges + 1] = {tonumber(r[1]), tonumber(r[2]), idx} end
      end
    end
    table.sort(ranges, function(a, b) return a[1] < b[1] end)
    local next_slot = 0
    for _, r in ipairs(ranges) do
      if r[1] >= next_slot then
        if r[1] > next_slot then parts[#parts + 1] = (r[1] - 1) .. ' 0' end
        parts[#parts + 1] = r[2] .. ' ' .. r[3]
        next_slot = r[2] + 1
      end
    end
    if next_slot <= 65535 then parts[#parts + 1] = '65535 0' end
  else
    local points = {}
    for idx, id in ipairs(registered) do
      for r = 0, 99 do points[#points + 1] = {murmur3(id .. ':' .. r) % 65536, idx} end
    end
    table.sort(points, function(a, b)
      if a[1] ~= b[1] then return a[1] < b[1] end
      return a[2] < b[2]
    end)
    for _, p in ipairs(points) do parts[#parts + 1] = p[1] .. ' ' .. p[2] end
    if #points > 0 then parts[#parts + 1] = '65535 ' .. points[1][2] end
  end
  return table.concat(parts, ' '), infos
end
if key_shared then
  table.sort(registered)
  local members = table.concat(registered, ' ')
  local flat_state = call('HGETALL', KEYS[13])
  local state = {}
  for f = 1, #flat_state, 2 do state[flat_state[f]] = flat_state[f + 1] end
  if state.m ~= members then
    local ring, infos = build_ring()
    local before, now_member = {}, {}
    for id in string.gmatch(state.m or '', '%S+') do before[id] = true end
    local summary = pending_summary()
    local out = 0
    for _, pair in ipairs(summary[4] or {}) do
      if pair[1] ~= HOLDER then out = out + tonumber(pair[2]) end
    end
    for idx, id in ipairs(registered) do
      now_member['j:' .. id] = true
      if not before[id] and out > 0 and not infos[idx].outOfOrder then
        -- Everything out with a consumer now is at or before the last pending entry.
        call('HSET', KEYS[13], 'j:' .. id, summary[3])
        state['j:' .. id] = summary[3]
      end
    end
    for field in pairs(state) do
      if string.sub(field, 1, 2) == 'j:' and not now_member[field] then
        call('HDEL', KEYS[13], field)
        state[field] = nil
      end
    end
    call('HSET', KEYS[13], 'm', members, 'r', ring)
    state.m, state.r, state.u = members, ring, nil
  end
  -- The ring's one owner (an index into the consumers, 0 = several or nobody) is kept beside
  -- it as "<owner> <ring length> <consumers>": parsing the ring (101 pairs a consumer) is most
  -- of what a call with one consumer would spend on it.  It counts only for the ring and the
  -- consumers it was worked out for (a ring written without it is parsed again).
  local uniform = nil
  local stamp = #(state.r or '') .. ' ' .. members
  local cached_owner, cached_for = string.match(state.u or '', '^(%d+) (.*)$')
  local valid = cached_for == stamp
  if valid then uniform = tonumber(cached_owner) end
  if uniform == nil or uniform == 0 then
    uniform = nil
    for e, o in string.gmatch(state.r or '', '(%d+) (%d+)') do
      ring_ends[#ring_ends + 1] = tonumber(e)
      local owner = tonumber(o)
      ring_owner[#ring_owner + 1] = owner
      if uniform == nil then uniform = owner elseif uniform ~= owner then uniform = 0 end
    end
    if not valid then call('HSET', KEYS[13], 'u', (uniform or 0) .. ' ' .. stamp) end
  end
  if uniform and uniform ~= 0 and registered[uniform] then sole_owner = registered[uniform] end
  -- The oldest entry out with a registered consumer (held entries, and those of consumers
  -- gone, wait in the redeliver zset and go in stream order), computed once, when needed.
  local oldest, looked = nil, false
  local function oldest_out()
    if not looked then
      looked = true
      for _, id in ipairs(registered) do
        for _, stream in ipairs(level_streams) do
          local first = call('XPENDING', stream, group, '-', '+', 1, id)
          if #first > 0 and (not oldest or id_lt(first[1][1], oldest)) then
            oldest = first[1][1]
          end
        end
      end
    end
    return oldest
  end
  for _, id in ipairs(registered) do
    local at = state['j:' .. id]
    if at then
      local first = oldest_out()
      if not first or id_lt(at, first) then
        call('HDEL', KEYS[13], 'j:' .. id)
      else
        joined[id] = at
      end
    end
  end
  for _, c in ipairs(consumers) do by_id[c[1]] = c end
end
local function owner_of(slot)
  local lo, hi = 1, #ring_ends
  if hi == 0 then return nil end
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if ring_ends[mid] >= slot then hi = mid else lo = mid + 1 end
  end
  local idx = ring_owner[lo]
  if not idx or idx == 0 then return nil end
  return registered[idx]
end

-- Fast path: without a byte budget and without batch entries in the partition, the entry
-- count alone bounds every budget, so entries are read once, by XREADGROUP itself.
local prio_on = pflags[3] and not key_shared
-- Key_Shared with one registered consumer that owns the whole ring, is not recently joined
-- and has nothing held for it: every entry, keyed or not, would go to it in stream order, so
-- it takes the fast path as Shared does (an entry it cannot take stays in the stream).
local ks_fast = key_shared and sole_owner ~= nil and #registered == 1
  and not joined[sole_owner] and not levels_on and call('ZCARD', KEYS[4]) == 0
local fast = byte_budget < 0 and ARGV[12] ~= '1' and (not key_shared or ks_fast)
  and not pflags[1]
  and not (delaying and pflags[2])
  and not prio_on
  and not (levels_on and oldest_every > 0)

-- Slow path: look at the entries first.  A caught-up subscription (everything left fits in
-- one read) may skip the budgets.
local fresh = {}
local fresh_stream = {}  -- with level streams: the stream of each entry of fresh
local guard_turn = nil  -- with level streams and a starvation guard: the turn before the call
local unthrottled = 0
-- The group's last-delivered id on a stream of the partition.
local function group_cursor(stream)
  if stream == KEYS[1] then return cursor end
  for _, g in ipairs(call('XINFO', 'GROUPS', stream)) do
    local info = {}
    for f = 1, #g, 2 do info[g[f]] = g[f + 1] end
    if info['name'] == group then return info['last-delivered-id'] end
  end
  return '0-0'
end
if not fast and not prio_on and levels_on then
  -- Level streams: Shared, Exclusive and Failover read the highest level first; Key_Shared
  -- reads every stream in arrival order (ids sort together), so each key keeps its order.
  local want = max_entries + 1
  if key_shared then
    local bound = nil  -- the last id read of a stream that had more: nothing after it goes
    for _, stream in ipairs(level_streams) do
      local got = call('XRANGE', stream, '(' .. group_cursor(stream), '+', 'COUNT', want)
      for _, entry in ipairs(got) do
        fresh[#fresh + 1] = entry
        fresh_stream[entry] = stream
      end
      if #got == want and (not bound or id_lt(got[#got][1], bound)) then bound = got[#got][1] end
    end
    table.sort(fresh, function(a, b) return id_lt(a[1], b[1]) end)
    local kept = {}
    for _, entry in ipairs(fresh) do
      if #kept >= want or (bound and id_lt(bound, entry[1])) then break end
      kept[#kept + 1] = entry
    end
    fresh = kept
  elseif oldest_every > 0 then
    -- The starvation guard: every N-th entry is the oldest at the head of a stream, the others
    -- the head of the highest level (the turn is kept in KEYS[5] "prio_turn", counting what
    -- goes out).
    local heads, at = {}, {}
    for k, stream in ipairs(level_streams) do
      heads[k] = call('XRANGE', stream, '(' .. group_cursor(stream), '+', 'COUNT', want)
      at[k] = 1
    end
    local turn = tonumber(call('HGET', KEYS[5], 'prio_turn') or '0') or 0
    guard_turn = turn
    while #fresh < want do
      local pick_k = nil
      for k = 1, #level_streams do
        local head = heads[k][at[k]]
        if head then
          if not pick_k then
            pick_k = k
            if turn % oldest_every ~= oldest_every - 1 then break end
          elseif id_lt(head[1], heads[pick_k][at[pick_k]][1]) then
            pick_k = k
          end
        end
      end
      if not pick_k then break end
      local entry = heads[pick_k][at[pick_k]]
      at[pick_k] = at[pick_k] + 1
      fresh[#fresh + 1] = entry
      fresh_stream[entry] = level_streams[pick_k]
      turn = turn + 1
    end
  else
    for _, stream in ipairs(level_streams) do
      local got = call('XRANGE', stream, '(' .. group_cursor(stream), '+', 'COUNT',
        want - #fresh)
      for _, entry in ipairs(got) do
        fresh[#fresh + 1] = entry
        fresh_stream[entry] = stream
      end
      if #fresh >= want then break end
    end
  end
  if ARGV[12] == '1' and #fresh <= max_entries then
    msg_budget, byte_budget, unthrottled = -1, -1, 1
  end
elseif not fast and not prio_on then
  fresh = call('XRANGE', KEYS[1], '(' .. cursor, '+', 'COUNT', max_entries + 1)
  if ARGV[12] == '1' and #fresh <= max_entries then
    msg_budget, byte_budget, unthrottled = -1, -1, 1
  end
end

local function fields_size(fields)
  local size, n = 0, 1
  for i = 1, #fields, 2 do
    local f = fields[i]
    if f == 'd' then size = #fields[i + 1]
    elseif f == 'n' then n = tonumber(fields[i + 1]) end
  end
  return size, n
end

-- An entry's priority (0..9, 4 without the field).
local function priority_of(fields)
  for f = 1, #fields, 2 do
    if fields[f] == 'u' then
      local p = tonumber(fields[f + 1])
      if p and p >= 0 and p <= 9 then return math.floor(p) end
      return 4
    end
  end
  return 4
end
-- A member of the priority index: the entry's id, payload size and message count (what the
-- budgets need), "<id>:<size>:<n>".
local function index_member(id, fields)
  local size, n = fields_size(fields)
  return id .. ':' .. size .. ':' .. n
end
-- An entry's priority, payload size and message count, in one pass over its fields.
local function entry_meta(fields)
  if #fields == 6 and fields[1] == 't' and fields[3] == 'd' and fields[5] == 'u' then
    -- The producer's common layout: publish time, payload, priority.
    local p = tonumber(fields[6])
    if p and p >= 0 and p <= 9 then p = math.floor(p) else p = 4 end
    return p, #fields[4], 1
  end
  local size, n, level = 0, 1, nil
  for f = 1, #fields, 2 do
    local name = fields[f]
    if name == 'd' then size = #fields[f + 1]
    elseif name == 'n' then n = tonumber(fields[f + 1])
    elseif name == 'u' and not level then
      local p = tonumber(fields[f + 1])
      if p and p >= 0 and p <= 9 then level = math.floor(p) else level = 4 end
    end
  end
  return level or 4, size, n
end
local find, sub = string.find, string.sub
local function from_member(member)
  local a = find(member, ':', 1, true)
  local b = a and find(member, ':', a + 1, true)
  if not b then return nil end
  return sub(member, 1, a - 1), tonumber(sub(member, a + 1, b - 1)), tonumber(sub(member, b + 1))
end

-- An entry's deliver-at time (ms), or nil.
local function deliver_at(fields)
  for f = 1, #fields, 2 do
    if fields[f] == 'a' then return tonumber(fields[f + 1]) end
  end
  return nil
end

-- Why the entry may not go (0 a read cap, 3 message budget, 4 byte budget, 5 max unacked),
-- or nil.  Redeliveries (is_new false) are pending already: the subscription limit lets them.
local function refuse(size, is_new)
  if entries >= max_entries then return 0 end
  if is_new and sub_room == 0 then return 5 end
  if entries > 0 and bytes + size > read_cap then return 0 end
  if msg_budget >= 0 and units >= msg_budget then return 3 end
  if byte_budget >= 0 and bytes >= byte_budget then return 4 end
  return nil
end

-- The consumer that takes the next entry, or nil when nobody has permits.
local turn = 1
local function pick()
  for _ = 1, #consumers do
    local c = consumers[turn]
    if c[2] > 0 and c[5] ~= 0 and c[3] < rr_chunk then return c end
    c[3] = 0
    turn = (turn % #consumers) + 1
  end
  for _ = 1, #consumers do
    local c = consumers[turn]
    if c[2] > 0 and c[5] ~= 0 then return c end
    turn = (turn % #consumers) + 1
  end
  return nil
end

-- Why nobody could take an entry: 5 when consumers with permits are at their unacked limit.
local function nobody()
  for _, c in ipairs(consumers) do
    if c[2] > 0 and c[5] == 0 then return 5 end
  end
  return 2
end

-- Key_Shared: the consumer that takes entry ``id`` now, or nil and whether it has a key (a
-- keyed entry that cannot go blocks its slot for the rest of the call).
local function ks_take(id, fields)
  local slot = key_slot(fields)
  if slot == nil then return pick(), false end
  if blocked[slot] then return nil, true end
  local owner = sole_owner or owner_of(slot)
  local c = owner and by_id[owner]
  if c and c[2] > 0 and c[5] ~= 0 and not joined[owner] then return c, true end
  blocked[slot] = true
  held_any = true
  return nil, true
end

-- Permits count messages (as in Pulsar); the message budget counts units.
local function charge(c, size, n, is_new)
  c[2] = c[2] - n
  c[3] = c[3] + 1
  c[4] = c[4] + n
  if c[5] > 0 then c[5] = c[5] - 1 end
  if is_new and sub_room > 0 then sub_room = sub_room - 1 end
  entries = entries + 1
  messages = messages + n
  units = units + (count_entries and 1 or n)
  bytes = bytes + size
end

-- 1. Redeliveries that are due.
local stop = false
-- Key_Shared looks further (entries wait there for their key's consumer) and in stream order.
local due_limit = key_shared and max_entries * 10 or max_entries
local due = call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, due_limit)
if key_shared then table.sort(due, id_lt) end
local more_due = key_shared and #due >= due_limit
local runs = {}
-- Level streams: whether a stream above a level holds entries not handed out yet (a delayed
-- entry come due waits for them, as it would behind its level's betters; read once a call).
local unread = nil
local function higher_waiting(level)
  if not unread then
    unread = {}
    local last = {}
    local flat = call('HGETALL', levels_key(KEYS[1]))
    for f = 1, #flat, 2 do last[level_stream(KEYS[1], tonumber(flat[f]))] = flat[f + 1] end
    local newest = call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
    last[KEYS[1]] = newest[1] and newest[1][1] or nil
    for k, stream in ipairs(level_streams) do
      unread[k] = last[stream] ~= nil and id_lt(group_cursor(stream), last[stream])
    end
  end
  for k, stream in ipairs(level_streams) do
    local above = stream == KEYS[1] and 4 or tonumber(string.sub(stream, #KEYS[1] + 2))
    if above > level and unread[k] then return true end
  end
  return false
end
for _, id in ipairs(due) do
  local stream = stream_of(KEYS[1], id)
  local found = call('XRANGE', stream, id, id)
  local taker = nil
  local waits = false
  if key_shared and #found > 0 then
    taker = ks_take(id, found[1][2])
    waits = taker == nil
  end
  local p = (#found > 0 and not waits) and call('XPENDING', stream, group, id, id, 1) or {}
  if waits then
    -- Its key's consumer cannot take it now: it stays scheduled.
    held_any = true
  elseif #found == 0 or #p == 0 then
    -- Trimmed, deleted or acknowledged meanwhile: nothing left to deliver.
    call('ZREM', KEYS[4], id)
    call('ZREM', DELAYED, id)
    call('XACK', stream, group, id)
  elseif levels_on and not key_shared and p[1][2] == HOLDER
      and higher_waiting(level_of(id) or 4) then
    -- Level streams: a delayed entry come due stays scheduled while higher levels have
    -- entries to hand out (it goes before those of its own level).
  elseif prio_on and p[1][2] == HOLDER then
    -- A held (delayed) entry come due waits in the priority index with the others.
    call('RPUSH', PRIO .. priority_of(found[1][2]), index_member(id, found[1][2]))
    call('ZREM', KEYS[4], id)
    call('ZREM', DELAYED, id)
  else
    -- A held entry (delayed) goes out for the first time: a new entry for the limits.
    local held = p[1][2] == HOLDER
    local size, n = fields_size(found[1][2])
    local why = refuse(size, held)
    local c = why == nil and (taker or pick()) or nil
    if why ~= nil then reason, stop = why, true break end
    if not c then reason, stop = nobody(), true break end
    local count = held and 1 or p[1][4] + 1
    call('XCLAIM', stream, group, c[1], 0, id, 'RETRYCOUNT', count, 'JUSTID')
    call('ZREM', KEYS[4], id)
    if held then call('ZREM', DELAYED, id) end
    local run = runs[c[1]]
    if not run then run = {} runs[c[1]] = run end
    run[#run + 1] = {id, found[1][2], count}
    charge(c, size, n, held)
    if not held then redelivered = redelivered + 1 end
  end
end
for consumer, run in pairs(runs) do
  call('RPUSH', qprefix .. consumer, cmsgpack.pack(run))
end

-- 1b. Priority: read new entries ahead into the index, then hand out from it, highest first.
-- Under strict priority, what this call reads waits in memory behind its level's list until
-- the hand-out is done, and only what is left joins the index then: an entry that goes out at
-- once (as most do once the backlog is ordered) is never indexed, and its fields are the ones
-- read.  The first read goes to the consumer round robin picks first, at most what it may take
-- (one claim less for what it does take); what it does not take is claimed for the holder.
local by_level = {}
if prio_on and not stop then
  -- The new entries of this call all come from the index: as many as the fast path's reads.
  max_entries = max_entries * math.max(tonumber(ARGV[24] or '1') or 1, 1)
  read_cap = read_cap * math.max(tonumber(ARGV[24] or '1') or 1, 1)
  local strict = oldest_every <= 0
  local waiting = {}
  local total = 0
  for level = 0, 9 do
    waiting[level] = call('LLEN', PRIO .. level)
    total = total + waiting[level]
  end
  local room = lookahead - total
  local read_all = true
  local pushes, fresh = {}, {}
  for level = 0, 9 do pushes[level], fresh[level] = {}, {} end
  local unheld = {}  -- read for a consumer, but to wait: claimed for the holder at the end
  local reader = strict and pick() or nil
  local function read(count, consumer)
    local reply = call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count,
      'STREAMS', KEYS[1], '>')
    return reply and reply[1] and reply[1][2] or {}
  end
  -- Read ahead in reads of at most 1,000 entries while the look-ahead has room and what was
  -- read stays under the call's read cap (so large payloads do not fill Redis's memory).
  local read_bytes = 0
  while room > 0 do
    local want = math.min(room, 1000)
    local direct, owner = 0, HOLDER
    if reader then
      -- Nothing read now goes out before the index's entries of priority 9.
      direct = math.min(want, max_entries - entries - waiting[9], reader[2])
      if reader[5] >= 0 then direct = math.min(direct, reader[5]) end
      if sub_room >= 0 then direct = math.min(direct, sub_room) end
      owner, reader = reader[1], nil
    end
    local got
    if direct > 0 then
      got = read(direct, owner)
      if #got == direct and direct < want then
        for _, entry in ipairs(read(want - direct, HOLDER)) do got[#got + 1] = entry end
      end
    else
      got = read(want, HOLDER)
    end
    for k = 1, #got do
      local id, fields = got[k][1], got[k][2]
      local mine = k <= direct and owner or HOLDER
      -- Only a partition that ever held a delayed entry (field "a") has one to look for.
      local at = delaying and pflags[2] and deliver_at(fields) or nil
      if at and at - margin > now then
        call('ZADD', KEYS[4], at - margin, id)
        call('ZADD', DELAYED, at - margin, id)
        if mine ~= HOLDER then unheld[#unheld + 1] = id end
      else
        local level, size, n = entry_meta(fields)
        read_bytes = read_bytes + size
        if strict then
          local list = fresh[level]
          list[#list + 1] = {id, fields, size, n, mine, got[k]}
        else
          local list = pushes[level]
          list[#list + 1] = id .. ':' .. size .. ':' .. n
          if #list >= 1000 then
            call('RPUSH', PRIO .. level, unpack(list))
            waiting[level] = waiting[level] + #list
            pushes[level] = {}
          end
        end
      end
    end
    if #got > 0 then cursor = got[#got][1] end
    room = room - #got
    if #got < want then break end
    if room <= 0 or read_bytes >= read_cap then
      read_all = false
      break
    end
  end
  if room <= 0 then read_all = false end
  for level = 0, 9 do
    local list = pushes[level]
    if #list > 0 then
      call('RPUSH', PRIO .. level, unpack(list))
      waiting[level] = waiting[level] + #list
    end
  end
  local prio_runs = {}
  local claims = {}  -- consumer -> {{id, size, n, level, fresh entry or nil}, ...} not claimed
  local claim_order = {}
  -- Take one entry for the next consumer (charged now, claimed in a batch by flush_claims):
  -- a member of the index, or an entry this call read (``entry``, its fields at hand); false
  -- when it may not go now (reason and stop set).
  local function take(id, size, n, level, entry)
    local why = refuse(size, true)
    if why ~= nil then reason, stop = why, true return false end
    local c = pick()
    if not c then reason, stop = nobody(), true return false end
    local list = claims[c[1]]
    if not list then
      list = {}
      claims[c[1]] = list
      claim_order[#claim_order + 1] = c
    end
    list[#list + 1] = {id, size, n, level, entry}
    charge(c, size, n, true)
    by_level[level] = (by_level[level] or 0) + n
    return true
  end
  local function take_member(member, level)
    local id, size, n = from_member(member)
    return take(id, size, n, level, nil)
  end
  -- Claim what was taken, per consumer: the index's entries in one XCLAIM, which returns
  -- them (Redis claims only what is still pending and in the stream: Redis 7 drops deleted
  -- entries from the group on a claim; what it did not claim is given back to the budgets),
  -- and this call's entries read for another consumer or the holder in one XCLAIM JUSTID.
  local function flush_claims()
    for _, c in ipairs(claim_order) do
      local list = claims[c[1]]
      local args, moved = {KEYS[1], group, c[1], 0}, {KEYS[1], group, c[1], 0}
      for k = 1, #list do
        local entry = list[k][5]
        if not entry then args[#args + 1] = list[k][1]
        elseif entry[5] ~= c[1] then moved[#moved + 1] = list[k][1] end
      end
      local claimed = {}
      if #args > 4 then
        args[#args + 1] = 'RETRYCOUNT'
        args[#args + 1] = 1
        for _, row in ipairs(call('XCLAIM', unpack(args))) do claimed[row[1]] = row end
      end
      if #moved > 4 then
        moved[#moved + 1] = 'RETRYCOUNT'
        moved[#moved + 1] = 1
        moved[#moved + 1] = 'JUSTID'
        call('XCLAIM', unpack(moved))
      end
      local run = prio_runs[c[1]]
      if not run then run = {} prio_runs[c[1]] = run end
      for k = 1, #list do
        local id, size, n, level, entry = unpack(list[k])
        local row = entry and entry[6] or claimed[id]
        if row then
          -- Into the consumer's packet of first deliveries, the [id, fields] row as
          -- XREADGROUP or XCLAIM returned it.
          run[#run + 1] = row
        else
          c[2], c[3], c[4] = c[2] + n, c[3] - 1, c[4] - n
          if c[5] >= 0 then c[5] = c[5] + 1 end
          if sub_room >= 0 then sub_room = sub_room + 1 end
          entries, messages, bytes = entries - 1, messages - n, bytes - size
          units = units - (count_entries and 1 or n)
          by_level[level] = by_level[level] - n
        end
      end
    end
    claims, claim_order = {}, {}
  end
  if strict then
    -- Each level in its order, highest first: its list a read at a time, then what this call
    -- read of that level.
    for level = 9, 0, -1 do
      while not stop and waiting[level] > 0 do
        local members = call('LRANGE', PRIO .. level, 0, max_entries - 1)
        if #members == 0 then break end
        local done = 0
        for m = 1, #members do
          if not take_member(members[m], level) then break end
          done = done + 1
        end
        if done > 0 then
          call('LTRIM', PRIO .. level, done, -1)
          waiting[level] = waiting[level] - done
        end
      end
      local list = fresh[level]
      local done = 0
      while not stop and done < #list do
        local entry = list[done + 1]
        if not take(entry[1], entry[3], entry[4], level, entry) then break end
        done = done + 1
      end
      list.done = done
      if stop then break end
    end
    flush_claims()
    -- What this call read and did not hand out joins the index, behind its level's list.
    for level = 0, 9 do
      local list = fresh[level]
      local members = {}
      for k = (list.done or 0) + 1, #list do
        local entry = list[k]
        members[#members + 1] = entry[1] .. ':' .. entry[3] .. ':' .. entry[4]
        if entry[5] ~= HOLDER then unheld[#unheld + 1] = entry[1] end
        if #members >= 1000 or k == #list then
          call('RPUSH', PRIO .. level, unpack(members))
          members = {}
        end
      end
    end
    for k = 1, #unheld, 1000 do
      local args = {KEYS[1], group, HOLDER, 0}
      for j = k, math.min(k + 999, #unheld) do args[#args + 1] = unheld[j] end
      args[#args + 1] = 'JUSTID'
      call('XCLAIM', unpack(args))
    end
  else
    -- Starvation guard: every oldest_every-th message sent is the oldest waiting one.
    local turn = tonumber(call('HGET', KEYS[5], 'prio_turn') or '0') or 0
    while not stop do
      local level, member = nil, nil
      if (turn + 1) % oldest_every == 0 then
        for l = 0, 9 do
          if waiting[l] > 0 then
            local head = call('LINDEX', PRIO .. l, 0)
            if head and (not member or id_lt(from_member(head), from_member(member))) then
              level, member = l, head
            end
          end
        end
      else
        for l = 9, 0, -1 do
          if waiting[l] > 0 then
            level, member = l, call('LINDEX', PRIO .. l, 0)
            break
          end
        end
      end
      if not member then break end
      local before = entries
      if not take_member(member, level) then break end
      call('LPOP', PRIO .. level)
      waiting[level] = waiting[level] - 1
      flush_claims()
      if entries > before then turn = turn + 1 end
    end
    call('HSET', KEYS[5], 'prio_turn', turn % oldest_every)
  end
  for consumer, run in pairs(prio_runs) do
    if #run > 0 then call('RPUSH', qprefix .. consumer, cmsgpack.pack(run)) end
  end
  if not stop and not read_all then
    -- The look-ahead was full: more entries wait in the stream.
    reason, stop = 0, true
  end
end

-- 2a. Fast path: per consumer run, XREADGROUP exactly as many entries as may go.
local drained = false
local si = 1  -- the stream read (level_streams)
local reads = math.max(tonumber(ARGV[24] or '1') or 1, 1)
local call_entries, call_cap = max_entries * reads, read_cap * reads
if fast and not stop then
  while true do
    local c = pick()
    if not c then reason, stop = nobody(), true break end
    local want = math.min(c[2], rr_chunk - c[3], max_entries, call_entries - entries)
    if msg_budget >= 0 then want = math.min(want, msg_budget - units) end
    if c[5] >= 0 then want = math.min(want, c[5]) end
    if sub_room >= 0 then want = math.min(want, sub_room) end
    if want <= 0 then
      if entries >= call_entries then reason = 0
      elseif sub_room == 0 then reason = 5
      else reason = 3 end
      stop = true
      break
    end
    local reply = call('XREADGROUP', 'GROUP', group, c[1], 'COUNT', want, 'STREAMS',
      level_streams[si], '>')
    local got = reply and reply[1] and reply[1][2] or {}
    while #got == 0 and si < #level_streams do
      -- Level streams: this level has nothing more, the next lower one goes on.
      si = si + 1
      reply = call('XREADGROUP', 'GROUP', group, c[1], 'COUNT', want, 'STREAMS',
        level_streams[si], '>')
      got = reply and reply[1] and reply[1][2] or {}
    end
    if #got == 0 then drained = true break end
    -- Every entry of the fast path holds one message: charge the run at once.
    local n, size = #got, payload_bytes(got)
    -- Already handed to the group: the run goes out whole, the read cap stops the next read.
    if bytes + size > call_cap then stop = true end
    c[2], c[3], c[4] = c[2] - n, c[3] + n, c[4] + n
    if c[5] > 0 then c[5] = math.max(c[5] - n, 0) end
    if sub_room > 0 then sub_room = math.max(sub_room - n, 0) end
    entries, messages, units, bytes = entries + n, messages + n, units + n, bytes + size
    if level_streams[si] == KEYS[1] then cursor = got[n][1] end
    if levels_on then
      local level = level_of(got[1][1]) or 4
      by_level[level] = (by_level[level] or 0) + n
    end
    if size <= PACKET_BYTES then
      -- Small payloads go in the element itself, as XREADGROUP returned them: the consumer
      -- reads nothing more (no second read of the same entries, no second round trip).
      call('RPUSH', qprefix .. c[1], cmsgpack.pack(got))
    else
      call('RPUSH', qprefix .. c[1], 'R' .. got[1][1] .. ' ' .. got[n][1])
    end
    if #got < want then
      if si == #level_streams then drained = true break end
      si = si + 1
    end
    if stop then reason = 0 break end
  end
end

-- 2b. Slow path: new entries after the cursor, in runs: one XREADGROUP and one notice each.
local i = 1
local run, run_owner, run_stream = {}, nil, KEYS[1]
local function flush()
  if run_owner and #run > 0 then
    call('XREADGROUP', 'GROUP', group, run_owner, 'COUNT', #run, 'STREAMS', run_stream, '>')
    if run_stream == KEYS[1] then cursor = run[#run] end
    call('RPUSH', qprefix .. run_owner, 'R' .. run[1] .. ' ' .. run[#run])
    if levels_on then
      local level = level_of(run[1]) or 4
      by_level[level] = (by_level[level] or 0) + #run
    end
  end
  run = {}
end
-- The stream of an entry of fresh; a run is of one stream (flushed when it changes).
local function stream_for(entry)
  return fresh_stream[entry] or KEYS[1]
end
local function hold(entry)
  flush()
  local stream = stream_for(entry)
  call('XREADGROUP', 'GROUP', group, HOLDER, 'COUNT', 1, 'STREAMS', stream, '>')
  if stream == KEYS[1] then cursor = entry[1] end
end
-- Key_Shared: entry by entry, to its key's consumer, or held.
if key_shared and not stop and more_due then
  -- Entries wait beyond what this call looked at: nothing new may pass them.
  if entries == 0 then reason = 2 end
  stop = true
end
if key_shared and not stop then
  local held_now = call('ZCARD', KEYS[4])
  while i <= #fresh do
    local entry = fresh[i]
    local at = delaying and deliver_at(entry[2]) or nil
    local hold_at, delayed = nil, false
    if at and at - margin > now then
      hold_at, delayed = at - margin, true
    else
      local size, n = fields_size(entry[2])
      local why = refuse(size, true)
      if why ~= nil then reason, stop = why, true break end
      local c, keyed = ks_take(entry[1], entry[2])
      if c then
        if c[1] ~= run_owner or stream_for(entry) ~= run_stream then
          flush()
          run_owner, run_stream = c[1], stream_for(entry)
        end
        run[#run + 1] = entry[1]
        charge(c, size, n, true)
      elseif not keyed then
        reason, stop = nobody(), true
        break
      elseif held_now >= due_limit then
        reason, stop = 2, true
        break
      else
        hold_at = now
      end
    end
    if hold_at then
      hold(entry)
      call('ZADD', KEYS[4], hold_at, entry[1])
      if delayed then call('ZADD', DELAYED, hold_at, entry[1]) end
      held_now = held_now + 1
    end
    i = i + 1
  end
end
while not key_shared and not stop and i <= #fresh do
  local c = pick()
  if not c then reason, stop = nobody(), true break end
  if c[1] ~= run_owner then
    flush()
    run_owner = c[1]
  end
  while i <= #fresh and c[2] > 0 and c[5] ~= 0 and c[3] < rr_chunk do
    local entry = fresh[i]
    local at = delaying and deliver_at(entry[2]) or nil
    if stream_for(entry) ~= run_stream then
      flush()
      run_stream = stream_for(entry)
    end
    if at and at - margin > now then
      -- Delayed: held until due (see ARGV[26]); what the run holds so far goes first.
      hold(entry)
      call('ZADD', KEYS[4], at - margin, entry[1])
      call('ZADD', DELAYED, at - margin, entry[1])
    else
      local size, n = fields_size(entry[2])
      local why = refuse(size, true)
      if why ~= nil then reason, stop = why, true break end
      run[#run + 1] = entry[1]
      charge(c, size, n, true)
    end
    i = i + 1
  end
end
flush()
call('SET', KEYS[2], cursor)
if drained or (not fast and not stop and #fresh <= max_entries) then
  -- Everything available was handed out: ask producers to wake us.
  call('SADD', KEYS[6], group)
  if entries == 0 then reason = 1 end
end
local upcoming = nil
if held_any then
  -- Key_Shared entries wait for permits or acknowledgements: either wakes the worker.
  if entries == 0 and reason ~= 5 then reason = 2 end
  call('SET', KEYS[10], '1')
end
if held_any or reason == 2 or reason == 5 then
  -- What is due now waits for a wake-up (permits, acks), and must not make the worker spin:
  -- it looks again for what comes due later.
  upcoming = next_due_later()
end
if reason == 2 then call('SET', KEYS[7], '1') end
if reason == 5 then call('SET', KEYS[10], '1') end
for _, c in ipairs(consumers) do
  if c[4] > 0 then call('HINCRBY', KEYS[3], c[1], -c[4]) end
end

if entries > 0 then
  call('HINCRBY', KEYS[5], 'msg_out', messages)
  call('HINCRBY', KEYS[5], 'bytes_out', bytes)
  if redelivered > 0 then call('HINCRBY', KEYS[5], 'redelivered', redelivered) end
  for level, n in pairs(by_level) do call('HINCRBY', KEYS[5], 'out_p' .. level, n) end
end
if guard_turn then
  call('HSET', KEYS[5], 'prio_turn', (guard_turn + entries - redelivered) % oldest_every)
end
if pending_total >= 0 then pending_total = pending_total + entries - redelivered end
local exhausted, wait_ms = settle(units, bytes, unthrottled == 1)
return {entries, messages, bytes, redelivered, reason, unthrottled, upcoming or next_due(), units,
  pending_total, exhausted, wait_ms}
