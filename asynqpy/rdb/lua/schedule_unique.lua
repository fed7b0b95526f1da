-- schedule_unique: schedule holding the uniqueness lock (asynq's ScheduleUnique); see _due.lua for its due time.
-- KEYS[1] unique lock   KEYS[2] task hash   KEYS[3] scheduled zset   KEYS[4] our exact due times asynqpy:{q}:due
-- ARGV[1] task id   ARGV[2] lock ttl (whole s, until process-at + unique ttl)
-- ARGV[3] process at (Unix s, ms), or '' to use ARGV[7]   ARGV[4] msg bytes   ARGV[5] wake channel ('' = none)
-- ARGV[6] queue   ARGV[7] process in (ms after Redis's TIME)   ARGV[8] exact times older than this many s are stale
-- returns "full:..." refused by the queue's backpressure limit (see _room.lua), 1 scheduled, 0 id conflict (lock stays), -1 duplicate
-- #include _clock.lua
-- #include _room.lua
-- #include _due.lua
local now = clock("")  -- one reading for the limit check and the task
local full = refusal(string.sub(KEYS[3], 1, -10), now.ms, 0)
if full then
  return full
end
local ok = redis.call("SET", KEYS[1], ARGV[1], "NX", "EX", ARGV[2])
if not ok then
  return -1
end
if redis.call("EXISTS", KEYS[2]) == 1 then
  return 0
end
redis.call("HSET", KEYS[2], "msg", ARGV[4], "state", "scheduled", "unique_key", KEYS[1])
schedule_due(KEYS[3], KEYS[4], ARGV[1], ARGV[3], ARGV[7], ARGV[8], now)
if ARGV[5] ~= "" then
  redis.call("PUBLISH", ARGV[5], ARGV[6])
end
return 1
