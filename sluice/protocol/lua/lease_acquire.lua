-- lease_acquire: take partition leases with new fencing tokens.
-- KEYS: per partition its lease and its epoch counter (KEYS[2i-1], KEYS[2i]), both with the
-- partition's hash tag.  On a Redis Cluster a call names one partition (one slot); on a
-- single server it may name many, which saves the caller a command per partition.
-- ARGV[1] the caller's worker id, ARGV[2..] the live workers as the caller last read them.
-- A lease is taken when it is free, when its holder (the token up to its last ':') is the
-- caller itself (a restarted process holds no token in memory: any older token of its own is
-- fenced by the new epoch), or when the holder is not among the live workers.  A lease has
-- no TTL: the holder's liveness is its heartbeat in the worker registry.
-- Returns, per partition in order, the token "<worker>:<epoch>", or 0 while a live other
-- worker holds the lease.
local me = ARGV[1]
local live = {}
for i = 2, #ARGV do live[ARGV[i]] = true end
local taken = {}
for i = 1, #KEYS, 2 do
  local held = redis.call('GET', KEYS[i])
  local holder = held and string.match(held, '^(.*):[^:]*$')
  if holder and holder ~= me and live[holder] then
    taken[#taken + 1] = 0
  else
    local token = me .. ':' .. redis.call('INCR', KEYS[i + 1])
    redis.call('SET', KEYS[i], token)
    taken[#taken + 1] = token
  end
end
return taken
