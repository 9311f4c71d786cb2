-- dispatch_many: dispatch.lua for several subscriptions of one partition in one script run
-- (a busy worker wakes many dispatchers of a partition at once; every key of the calls is in
-- the partition's slot, so the run is cluster-safe; on a single server, not a Redis Cluster,
-- the worker's renewal clock also runs calls of several partitions in one run, every key of
-- which is among KEYS).  The calls run one after another, in
-- order, each exactly as dispatch.lua would run alone (its own KEYS and ARGV, its own checks
-- of the lease and the quotas): the same as the same calls pipelined at the moment the run
-- starts (their limiters read the run's one clock).
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
-- The limiters' clock: Redis's TIME read once for the run (its calls run at the same
-- moment, one after another), handed to each call that would read it itself (ARGV[25]
-- empty).
local run_clock = nil
local key_at, arg_at = 1, 2 * n + 2
for i = 1, n do
  local key_count, arg_count = tonumber(ARGV[1 + i]), tonumber(ARGV[1 + n + i])
  -- Each table made at its size in one step (unpack into a constructor).
  local call_keys = {unpack(KEYS, key_at, key_at + key_count - 1)}
  local call_args = {unpack(ARGV, arg_at, arg_at + arg_count - 1)}
  key_at, arg_at = key_at + key_count, arg_at + arg_count
  if arg_count >= 25 and call_args[25] == '' then
    if not run_clock then
      local clock = redis.call('TIME')
      run_clock = tonumber(clock[1]) * 1000 + tonumber(clock[2]) / 1000
    end
    call_args[25] = run_clock
  end
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
