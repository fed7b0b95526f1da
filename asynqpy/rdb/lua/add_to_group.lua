-- add_to_group: a new task waits in its group for aggregation (asynq's AddToGroup[Unique]).
-- KEYS[1] task hash   KEYS[2] group zset   KEYS[3] groups set   KEYS[4] unique lock (optional)
-- ARGV[1] msg bytes   ARGV[2] task id   ARGV[3] now (Unix s)   ARGV[4] group name   ARGV[5] lock ttl s (with KEYS[4])
-- returns "full:..." refused by the queue's backpressure limit (see _room.lua; nothing written, no lock taken),
-- 1 added, 0 id conflict, -1 duplicate
-- #include _clock.lua
-- #include _room.lua
local full = refusal(string.sub(KEYS[3], 1, -7), clock("").ms, 0)
if full then
  return full
end
if KEYS[4] then
  local ok = redis.call("SET", KEYS[4], ARGV[2], "NX", "EX", ARGV[5])
  if not ok then
    return -1
  end
end
if redis.call("EXISTS", KEYS[1]) == 1 then
  return 0
end
redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "aggregating", "group", ARGV[4])
redis.call("ZADD", KEYS[2], ARGV[3], ARGV[2])
local aggn = "asynqpy:" .. string.sub(KEYS[3], 7, -7) .. "aggn"  -- the size limit's kept count (_room.lua)
if redis.call("EXISTS", aggn) == 1 then
  redis.call("INCR", aggn)
end
redis.call("SADD", KEYS[3], ARGV[4])
return 1
