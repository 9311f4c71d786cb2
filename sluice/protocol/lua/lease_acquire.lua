-- lease_acquire: take a free partition lease with a new fencing token.
-- KEYS[1] lease, KEYS[2] epoch counter; ARGV[1] worker id, ARGV[2] lease TTL (ms).
-- Returns the token "<worker>:<epoch>", or false while another worker holds the lease.
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local token = ARGV[1] .. ':' .. redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], token, 'PX', ARGV[2])
return token
