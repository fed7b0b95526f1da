-- schedule: a new task waits in scheduled until its time (asynq's Schedule).
-- KEYS[1] task hash   KEYS[2] scheduled zset
-- ARGV[1] msg bytes   ARGV[2] process at (Unix s, may be fractional)   ARGV[3] task id
-- ARGV[4] wake channel ('' = none)   ARGV[5] queue
-- returns 1 scheduled, 0 id conflict
if redis.call("EXISTS", KEYS[1]) == 1 then
  return 0
end
redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "scheduled")
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[3])
if ARGV[4] ~= "" then
  redis.call("PUBLISH", ARGV[4], ARGV[5])
end
return 1
