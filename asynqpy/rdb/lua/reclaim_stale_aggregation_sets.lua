-- reclaim_stale_aggregation_sets: sets whose aggregator died go back to their groups (asynq's recoverer step).
-- KEYS[1] aggregation_sets   KEYS[2] groups set
-- ARGV[1] now (Unix s)   ARGV[2] group key prefix asynq:{q}:g:
-- returns how many sets were reclaimed. Unlike asynq, the group is re-added to the groups set so the
-- aggregator sees it again.
local sets = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1])
for _, setKey in ipairs(sets) do
  local groupKey = string.match(setKey, "(.*):[^:]+$")
  local res = redis.call("ZRANGE", setKey, 0, -1, "WITHSCORES")
  for i = 1, #res, 2 do
    redis.call("ZADD", groupKey, tonumber(res[i + 1]), res[i])
  end
  redis.call("DEL", setKey)
  if #res > 0 then
    redis.call("SADD", KEYS[2], string.sub(groupKey, #ARGV[2] + 1))
  end
end
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[1])
return #sets
