-- lease_fence: the admin service deletes a partition's lease while the given worker holds it
-- (a worker that did not confirm a policy change in time is fenced off; it takes its leases
-- again once it has read every policy).
-- KEYS[1] the partition's lease; ARGV[1] what every fencing token of the worker starts with
-- ("<worker>:", sluice.protocol.scripts.holder_prefix).  Returns 1 when deleted, else 0.
local token = redis.call('GET', KEYS[1])
if token and string.sub(token, 1, #ARGV[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
