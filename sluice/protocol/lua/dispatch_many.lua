-- dispatch_many: dispatch.lua for several subscriptions of one partition in one script run
-- (a busy worker wakes many dispatchers of a partition at once; every key of the calls is in
-- the partition's slot, so the run is cluster-safe; on a single server, not a Redis Cluster,
-- the worker's renewal clock also runs calls of several partitions in one run, every key of
-- which is among KEYS).  The calls run one after another, in
-- order, each exactly as dispatch.lua would run alone (its own KEYS and ARGV, its own checks
-- of the lease and the quotas): the same as the same calls pipelined.
-- ARGV[1] n, the number of calls; ARGV[2..n+1] each call's key count; ARGV[n+2..2n+1] each
-- call's argument count; then the calls' arguments, call after call.  KEYS: the calls' keys,
-- call after call.
-- Returns an array of n replies, each dispatch.lua's reply to that call, or its error (the
-- error "FENCED" when the caller no longer owns the partition, or a failed command).
local function dispatch_one(KEYS, ARGV)
-- include dispatch.lua
end

local n = tonumber(ARGV[1])
local out = {}
local key_at, arg_at = 1, 2 * n + 2
for i = 1, n do
  local key_count, arg_count = tonumber(ARGV[1 + i]), tonumber(ARGV[1 + n + i])
  local call_keys, call_args = {}, {}
  for j = 1, key_count do call_keys[j] = KEYS[key_at + j - 1] end
  for j = 1, arg_count do call_args[j] = ARGV[arg_at + j - 1] end
  key_at, arg_at = key_at + key_count, arg_at + arg_count
  local ok, reply = pcall(dispatch_one, call_keys, call_args)
  if ok then
    out[i] = reply
  elseif type(reply) == 'table' and reply.err then
    out[i] = reply
  else
    out[i] = redis.error_reply(tostring(reply))
  end
end
return out
