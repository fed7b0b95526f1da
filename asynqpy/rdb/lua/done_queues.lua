-- done_queues: done.lua for the finished tasks of several queues of one Redis node, in one call.
-- ARGV[1] stats expiry (Unix s)   ARGV[2] the UTC day ("2024-05-01", as the processed:<utc day> key names it)
-- then per queue: its key prefix ("asynq:{q}:", rdb/keys.py queue_prefix), the number k of its tasks, and k
-- pairs: task id, unique-lock key ('' = none)
-- No KEYS: each queue's keys are its prefix and their asynq names (active, lease, t:<id>, processed:<day>,
-- processed), as rdb/keys.py writes them; a batch over 100 queues names each once, not four keys and a prefix.
-- Every key of a queue shares its hash tag and the queues differ, so this runs only where all the queues live on
-- one node (not on a cluster: there the acker sends done.lua per queue).
-- returns the ids no longer held by this worker (not in lease), which were left alone. The steps of one queue are
-- done_tasks() in _done.lua, shared with done.lua.
-- #include _stats.lua
-- #include _finish.lua
-- #include _done.lua
local lost = {}
local expire_at, day = ARGV[1], ARGV[2]
local a = 3
while a <= #ARGV do
  local p, k = ARGV[a], tonumber(ARGV[a + 1])
  local last = a + 1 + 2 * k
  done_tasks(p .. "active", p .. "lease", p .. "t:", p .. "processed:" .. day, p .. "processed", a + 2, last,
             expire_at, lost)
  a = last + 1
end
return lost
