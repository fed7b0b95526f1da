-- schedule: a new task waits in scheduled until its time (asynq's Schedule).
-- KEYS[1] task hash   KEYS[2] scheduled zset   KEYS[3] our exact due times asynqpy:{q}:due
-- ARGV[1] msg bytes   ARGV[2] process at (whole Unix s, rounded up)   ARGV[3] task id
-- ARGV[4] wake channel ('' = none)   ARGV[5] queue   ARGV[6] process at, exact (Unix s, ms)
-- ARGV[7] exact times before this are stale (now - 60 s)
-- returns 1 scheduled, 0 id conflict
-- #include _due.lua
if redis.call("EXISTS", KEYS[1]) == 1 then
  return 0
end
redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "scheduled")
put_due(KEYS[2], KEYS[3], ARGV[3], ARGV[2], ARGV[6], ARGV[7])
if ARGV[4] ~= "" then
  redis.call("PUBLISH", ARGV[4], ARGV[5])
end
return 1
