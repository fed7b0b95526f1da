-- enqueue: a new task goes to pending (asynq's Enqueue), then to an idle worker of ours, or wakes workers.
-- pending_since and the hand-off's lease are by the Redis server's clock (see _clock.lua).
-- KEYS[1] task hash   KEYS[2] pending list   KEYS[3] waiters zset   KEYS[4] paused   KEYS[5] active   KEYS[6] lease
-- ARGV[1] msg bytes   ARGV[2] task id   ARGV[3] wake channel ('' = none)   ARGV[4] queue
-- ARGV[5] hand-off lease (s)   ARGV[6] task key prefix   ARGV[7] hand-off key prefix
-- ARGV[8] "1": admitted already, not checked against the queue's backpressure limit (optional; the aggregator's
-- one task made of a group's tasks, which were counted when they were added)
-- returns "full:..." refused by the queue's backpressure limit (see _room.lua), 1 enqueued, 0 a task with this id exists (TaskIDConflict)
-- #include _clock.lua
-- #include _room.lua
-- #include _limits.lua
-- #include _handoff.lua
-- #include _new_task.lua
local now = clock("")  -- one reading for the limit check and the task
local plain, full, taken = new_task_checks(KEYS[2], KEYS[4], KEYS[1], now.ms, ARGV[8] ~= "1")
if full then
  return full
end
if taken then
  return 0
end
enqueue_new(KEYS[1], ARGV[2], ARGV[1], {}, now.ns, KEYS[3], KEYS[4], KEYS[2], KEYS[5], KEYS[6], now.s,
            math.ceil(now.ms / 1000 + tonumber(ARGV[5])), ARGV[6], ARGV[7], ARGV[3], ARGV[4], plain)
return 1
