-- ack_cumulative: acknowledge every entry pending for a consumer up to and including an id.
-- KEYS[1] stream, KEYS[2] redeliver zset, KEYS[3] subscription stats hash,
-- KEYS[4] waitack flag (the dispatcher stopped at a max-unacked limit)
-- ARGV[1] subscription (group), ARGV[2] consumer, ARGV[3] last entry id,
-- ARGV[4] wake channel, ARGV[5] wake payload
-- Returns the number of entries acknowledged; wakes a dispatcher waiting for acks
-- (or a dormant partition).
-- include lib/ack_tail.lua
-- With level streams, "up to" is in arrival order: the ids of every stream sort together.
local total = 0
for _, stream in ipairs(streams_of(KEYS[1])) do
  while true do
    local pending = redis.call('XPENDING', stream, ARGV[1], '-', ARGV[3], 1000, ARGV[2])
    if #pending == 0 then break end
    local ids = {}
    for i, p in ipairs(pending) do ids[i] = p[1] end
    total = total + ack_ids(ids)
    if #pending < 1000 then break end
  end
end
return acked(total, ARGV[4], ARGV[5])
