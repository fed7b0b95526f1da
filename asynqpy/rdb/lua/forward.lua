-- forward: due scheduled and retry tasks go to pending, or to their group (asynq's forwarder, both sets at once).
-- KEYS[1] scheduled zset   KEYS[2] retry zset   KEYS[3] pending list
-- ARGV[1] now (Unix s, fractional)   ARGV[2] task key prefix   ARGV[3] now (Unix ns)   ARGV[4] group key prefix
-- ARGV[5] batch size
-- returns {moved, next due score as a string or ''}: the caller sleeps until that time
local moved = 0
local limit = tonumber(ARGV[5])
for k = 1, 2 do
  local ids = redis.call("ZRANGEBYSCORE", KEYS[k], "-inf", ARGV[1], "LIMIT", 0, limit - moved)
  for _, id in ipairs(ids) do
    local key = ARGV[2] .. id
    local group = redis.call("HGET", key, "group")
    if group and group ~= "" then
      redis.call("ZADD", ARGV[4] .. group, ARGV[1], id)
      redis.call("HSET", key, "state", "aggregating")
    else
      redis.call("LPUSH", KEYS[3], id)
      redis.call("HSET", key, "state", "pending", "pending_since", ARGV[3])
    end
    redis.call("ZREM", KEYS[k], id)
    moved = moved + 1
  end
end
local nextdue = ""
for k = 1, 2 do
  local first = redis.call("ZRANGE", KEYS[k], 0, 0, "WITHSCORES")
  if first[2] and (nextdue == "" or tonumber(first[2]) < tonumber(nextdue)) then
    nextdue = first[2]
  end
end
return {moved, nextdue}
