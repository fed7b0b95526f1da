-- done: tasks that succeeded without retention (or were revoked) are deleted and counted (asynq's Done, batched).
-- KEYS[1] active   KEYS[2] lease   KEYS[3] processed:<utc day>   KEYS[4] processed (all time)
-- ARGV[1] stats expiry (Unix s)   ARGV[2] task key prefix
-- ARGV[3..] pairs: task id, unique-lock key ('' = none)
-- returns the ids no longer held by this worker (not in lease), which were left alone. The steps are done_tasks()
-- in _done.lua, shared with done_queues.lua.
-- #include _stats.lua
-- #include _finish.lua
-- #include _done.lua
local lost = {}
done_tasks(KEYS[1], KEYS[2], ARGV[2], KEYS[3], KEYS[4], 3, #ARGV, ARGV[1], lost)
return lost
