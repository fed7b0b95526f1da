-- delete_aggregation_set: after the aggregated task is enqueued, its source tasks go (asynq's DeleteAggregationSet).
-- KEYS[1] set key   KEYS[2] aggregation_sets
-- ARGV[1] task key prefix
-- returns how many task hashes were deleted
local ids = redis.call("ZRANGE", KEYS[1], 0, -1)
for _, id in ipairs(ids) do
  redis.call("DEL", ARGV[1] .. id)
end
redis.call("DEL", KEYS[1])
redis.call("ZREM", KEYS[2], KEYS[1])
return #ids
