-- mark_complete: tasks that succeeded with retention move to completed (asynq's MarkAsComplete, batched).
-- KEYS[1] active   KEYS[2] lease   KEYS[3] completed   KEYS[4] processed:<utc day>   KEYS[5] processed (all time)
-- ARGV[1] stats expiry (Unix s)   ARGV[2] task key prefix
-- ARGV[3..] quads: task id, expiry (whole Unix s), msg with completed_at set, unique-lock key ('' = none)
-- returns the ids no longer held by this worker, which were left alone
-- #include _stats.lua
-- #include _finish.lua
local lost = {}
local n = 0
for i = 3, #ARGV, 4 do
  local id = ARGV[i]
  if leave_active(KEYS[1], KEYS[2], id, "") then
    redis.call("ZADD", KEYS[3], ARGV[i + 1], id)
    redis.call("HSET", ARGV[2] .. id, "msg", ARGV[i + 2], "state", "completed")
    release_unique(ARGV[i + 3], id)
    n = n + 1
  else
    lost[#lost + 1] = id
  end
end
count_processed(KEYS[4], KEYS[5], n, ARGV[1])
return lost
