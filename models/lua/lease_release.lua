-- lease_release: give a lease up, leaving the limiter state for the next owner.
-- KEYS[1] lease, KEYS[2] handover; ARGV[1] token, ARGV[2] handover JSON ("" = none),
-- ARGV[3] handover lifetime (ms).  Returns 1, or 0 when the lease was no longer ours.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
if ARGV[2] ~= '' and tonumber(ARGV[3]) > 0 then
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
end
return 1
