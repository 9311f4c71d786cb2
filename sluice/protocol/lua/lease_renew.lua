-- lease_renew: extend a lease this worker still holds.
-- KEYS[1] lease; ARGV[1] token, ARGV[2] lease TTL (ms).  Returns 1, or 0 when it was lost.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
