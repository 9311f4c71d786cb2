-- lease_release: give a lease up (the limiters' periods stay in Redis for the next owner).
-- KEYS[1] lease; ARGV[1] token.  Returns 1, or 0 when the lease was no longer ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
