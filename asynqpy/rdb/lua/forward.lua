-- forward: due scheduled and retry tasks go to pending, or to their group (asynq's forwarder, both sets at once);
-- each one that reaches pending goes straight to an idle worker of ours when one waits (see _handoff.lua),
-- and if any is left in pending, idle workers are woken.
-- KEYS[1] scheduled zset   KEYS[2] retry zset   KEYS[3] pending list
-- KEYS[4] waiters zset   KEYS[5] paused   KEYS[6] active   KEYS[7] lease
-- ARGV[1] now (Unix s, fractional)   ARGV[2] task key prefix   ARGV[3] now (Unix ns)   ARGV[4] group key prefix
-- ARGV[5] batch size   ARGV[6] lease expiry (Unix s)   ARGV[7] hand-off key prefix   ARGV[8] wake channel ('' = none)
-- ARGV[9] queue
-- returns {moved, next due score as a string or ''}: the caller sleeps until that time
-- #include _handoff.lua
local moved = 0
local waiting = 0
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
      if not handoff(KEYS[4], KEYS[5], KEYS[3], KEYS[6], KEYS[7], ARGV[1], ARGV[6], ARGV[2], ARGV[7]) then
        waiting = waiting + 1
      end
    end
    redis.call("ZREM", KEYS[k], id)
    moved = moved + 1
  end
end
if waiting > 0 and ARGV[8] ~= "" then
  redis.call("PUBLISH", ARGV[8], ARGV[9])
end
local nextdue = ""
for k = 1, 2 do
  local first = redis.call("ZRANGE", KEYS[k], 0, 0, "WITHSCORES")
  if first[2] and (nextdue == "" or tonumber(first[2]) < tonumber(nextdue)) then
    nextdue = first[2]
  end
end
return {moved, nextdue}
