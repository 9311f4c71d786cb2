-- lease_acquire: take a partition lease with a new fencing token.
-- KEYS[1] lease, KEYS[2] epoch counter (both carry the partition's hash tag);
-- ARGV[1] the caller's worker id, ARGV[2..] the live workers as the caller last read them.
-- The lease is taken when it is free, when its holder (the token up to its last ':') is the
-- caller itself (a restarted process holds no token in memory: any older token of its own
-- is fenced by the new epoch), or when the holder is not among the live workers.  A lease
-- has no TTL: the holder's liveness is its heartbeat in the worker registry.
-- Returns the token "<worker>:<epoch>", or false while a live other worker holds the lease.
local held = redis.call('GET', KEYS[1])
if held then
  local holder = string.match(held, '^(.*):[^:]*$')
  if holder ~= ARGV[1] then
    for i = 2, #ARGV do
      if ARGV[i] == holder then return false end
    end
  end
end
local token = ARGV[1] .. ':' .. redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token)
return token
