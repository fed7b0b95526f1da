-- schedule: a new task waits in scheduled until its time (asynq's Schedule); see _due.lua for its due time.
-- KEYS[1] task hash   KEYS[2] scheduled zset   KEYS[3] our exact due times asynqpy:{q}:due
-- ARGV[1] msg bytes   ARGV[2] process at (Unix s, ms), or '' to use ARGV[6]   ARGV[3] task id
-- ARGV[4] wake channel ('' = none)   ARGV[5] queue   ARGV[6] process in (ms after Redis's TIME)
-- ARGV[7] exact times older than this many seconds are stale
-- returns "full:..." refused by the queue's backpressure limit (see _room.lua), 1 scheduled, 0 id conflict
-- #include _clock.lua
-- #include _room.lua
-- #include _due.lua
local now = clock("")  -- one reading for the limit check and the task
local full = refusal(string.sub(KEYS[2], 1, -10), now.ms, 0)
if full then
  return full
end
if redis.call("EXISTS", KEYS[1]) == 1 then
  return 0
end
redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "scheduled")
schedule_due(KEYS[2], KEYS[3], ARGV[3], ARGV[2], ARGV[6], ARGV[7], now)
if ARGV[4] ~= "" then
  redis.call("PUBLISH", ARGV[4], ARGV[5])
end
return 1
