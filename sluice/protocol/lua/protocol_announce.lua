-- protocol_announce: a worker or admin service announces the data-plane protocol it speaks and
-- the oldest one it works beside (sluice.protocol.version), in one atomic step.
-- KEYS[1] the client settings hash (sl:{meta}:config); ARGV[1] protocol, ARGV[2] oldest peer.
-- Returns {protocolOldest, protocolNewest} of the deployment afterwards, or the error
-- "ProtocolMismatch <oldest> <newest>" (nothing written) when the caller's protocol is below
-- the deployment's protocolOldest.
local f = redis.call('HMGET', KEYS[1], 'protocolOldest', 'protocolNewest')
local oldest, newest = tonumber(f[1]) or 0, tonumber(f[2]) or 0
local protocol, peer = tonumber(ARGV[1]), tonumber(ARGV[2])
if protocol < oldest then
  return redis.error_reply('ProtocolMismatch ' .. oldest .. ' ' .. math.max(newest, oldest))
end
if peer > oldest then
  oldest = peer
  redis.call('HSET', KEYS[1], 'protocolOldest', oldest)
end
if protocol > newest then
  newest = protocol
  redis.call('HSET', KEYS[1], 'protocolNewest', newest)
end
return {oldest, newest}
