-- aggregation_check: when a group is ready, move its tasks into a new aggregation set (asynq's AggregationCheck).
-- KEYS[1] group zset g:<name>   KEYS[2] new set g:<name>:<set id>   KEYS[3] aggregation_sets   KEYS[4] groups set
-- ARGV[1] max size (0 = unlimited)   ARGV[2] max delay s (0 = off)   ARGV[3] grace period s
-- ARGV[4] set deadline (Unix s)   ARGV[5] now (Unix s)   ARGV[6] group name
-- returns 1 a set was made (KEYS[2]), 0 not ready
local size = redis.call("ZCARD", KEYS[1])
if size == 0 then
  return 0
end
local maxSize = tonumber(ARGV[1])
local now = tonumber(ARGV[5])
local function move(count)
  local stop = -1
  if count > 0 then stop = count - 1 end
  local res = redis.call("ZRANGE", KEYS[1], 0, stop, "WITHSCORES")
  for i = 1, #res, 2 do
    redis.call("ZADD", KEYS[2], tonumber(res[i + 1]), res[i])
  end
  redis.call("ZREMRANGEBYRANK", KEYS[1], 0, stop)
  redis.call("ZADD", KEYS[3], ARGV[4], KEYS[2])
  if redis.call("ZCARD", KEYS[1]) == 0 then
    redis.call("SREM", KEYS[4], ARGV[6])
  end
  return 1
end
if maxSize ~= 0 and size >= maxSize then
  return move(maxSize)
end
local maxDelay = tonumber(ARGV[2])
if maxDelay ~= 0 then
  local oldest = redis.call("ZRANGE", KEYS[1], 0, 0, "WITHSCORES")
  if tonumber(oldest[2]) <= now - maxDelay then
    return move(maxSize)
  end
end
local newest = redis.call("ZRANGE", KEYS[1], -1, -1, "WITHSCORES")
if tonumber(newest[2]) <= now - tonumber(ARGV[3]) then
  return move(maxSize)
end
return 0
