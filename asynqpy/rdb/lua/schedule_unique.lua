-- schedule_unique: schedule holding the uniqueness lock (asynq's ScheduleUnique).
-- KEYS[1] unique lock   KEYS[2] task hash   KEYS[3] scheduled zset   KEYS[4] our exact due times asynqpy:{q}:due
-- ARGV[1] task id   ARGV[2] lock ttl (whole s, until process-at + unique ttl)
-- ARGV[3] process at (whole Unix s, rounded up)   ARGV[4] msg bytes   ARGV[5] wake channel ('' = none)
-- ARGV[6] queue   ARGV[7] process at, exact (Unix s, ms)   ARGV[8] exact times before this are stale (now - 60 s)
-- returns 1 scheduled, 0 id conflict (lock stays), -1 duplicate
-- #include _due.lua
local ok = redis.call("SET", KEYS[1], ARGV[1], "NX", "EX", ARGV[2])
if not ok then
  return -1
end
if redis.call("EXISTS", KEYS[2]) == 1 then
  return 0
end
redis.call("HSET", KEYS[2], "msg", ARGV[4], "state", "scheduled", "unique_key", KEYS[1])
put_due(KEYS[3], KEYS[4], ARGV[1], ARGV[3], ARGV[7], ARGV[8])
if ARGV[5] ~= "" then
  redis.call("PUBLISH", ARGV[5], ARGV[6])
end
return 1
