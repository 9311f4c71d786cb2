-- limits: the owning worker writes a partition's resolved abuse limits, publish and subscribe
-- rates, durable acknowledgements and delivery-delay limit, which subscribe.lua, producer.lua
-- and produce.lua read.
-- KEYS[1] partition lease, KEYS[2] the partition's abuse limits hash
-- ARGV[1] fencing token: the lease must hold it ("" = no ownership check), then field/value
-- pairs (maxSubscriptionsPerTopic, maxProducersPerTopic, maxConsumersPerTopic,
-- maxConsumersPerSubscription, maxMessageSize, publishThrottlingRateInMsg,
-- publishThrottlingRateInByte, subscribeThrottlingRatePerConsumer,
-- subscribeRatePeriodPerConsumerInSecond, durableAckReplicas, durableAckTimeoutMs,
-- delayedDeliveryMaxDelayInMillis, resourceGroupId, resourceGroupPublishInMsg,
-- resourceGroupPublishInByte, priorityEvictionLimit)
-- Replaces the hash; no pairs (the defaults: no limit, 5 MB messages) leave no hash.
-- Returns 1, or the error "FENCED" (nothing written).
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return redis.error_reply('FENCED partition lease lost')
end
redis.call('DEL', KEYS[2])
if #ARGV > 1 then redis.call('HSET', KEYS[2], unpack(ARGV, 2)) end
return 1
