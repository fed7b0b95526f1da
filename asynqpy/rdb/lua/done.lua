-- done: tasks that succeeded without retention (or were revoked) are deleted and counted (asynq's Done, batched).
-- KEYS[1] active   KEYS[2] lease   KEYS[3] processed:<utc day>   KEYS[4] processed (all time)
-- ARGV[1] stats expiry (Unix s)   ARGV[2] task key prefix
-- ARGV[3..] pairs: task id, unique-lock key ('' = none)
-- returns the ids no longer held by this worker (not in lease), which were left alone
-- #include _stats.lua
-- #include _finish.lua
local lost = {}
local n = 0
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  if leave_active(KEYS[1], KEYS[2], id, "") then
    redis.call("DEL", ARGV[2] .. id)
    release_unique(ARGV[i + 1], id)
    n = n + 1
  else
    lost[#lost + 1] = id
  end
end
count_processed(KEYS[3], KEYS[4], n, ARGV[1])
return lost
