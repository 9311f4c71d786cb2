-- lease_release: give leases up (the limiters' periods stay in Redis for the next owner).
-- KEYS[i] a lease, ARGV[i] the token it must still hold to be released; on a Redis Cluster
-- one lease a call, on a single server as many as the caller batches.
-- Returns the number released (for one lease: 1, or 0 when it was no longer ours).
local released = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[i] then
    redis.call('DEL', KEYS[i])
    released = released + 1
  end
end
return released
