-- ack: acknowledge entries individually.
-- KEYS[1] stream, KEYS[2] redeliver zset, KEYS[3] subscription stats hash,
-- KEYS[4] waitack flag (the dispatcher stopped at a max-unacked limit)
-- ARGV[1] subscription (group), ARGV[2] wake channel, ARGV[3] wake payload, ARGV[4..] entry ids
-- Returns the number of entries that were pending and are now acknowledged.  When some were
-- and the dispatcher waits for acks, it is woken,
-- and so is a dormant partition.
-- include lib/ack_tail.lua
local ids = {}
for i = 4, #ARGV do ids[#ids + 1] = ARGV[i] end
return acked(ack_ids(ids), ARGV[2], ARGV[3])
