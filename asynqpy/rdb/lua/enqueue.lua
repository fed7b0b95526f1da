-- enqueue: a new task goes to pending (asynq's Enqueue), then to an idle worker of ours, or wakes workers.
-- KEYS[1] task hash   KEYS[2] pending list   KEYS[3] waiters zset   KEYS[4] paused   KEYS[5] active   KEYS[6] lease
-- ARGV[1] msg bytes   ARGV[2] task id   ARGV[3] now (Unix ns)   ARGV[4] wake channel ('' = none)   ARGV[5] queue
-- ARGV[6] now (Unix s)   ARGV[7] lease expiry (Unix s)   ARGV[8] task key prefix   ARGV[9] hand-off key prefix
-- returns 1 enqueued, 0 a task with this id exists (TaskIDConflict)
-- #include _handoff.lua
if redis.call("EXISTS", KEYS[1]) == 1 then
  return 0
end
redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "pending", "pending_since", ARGV[3])
redis.call("LPUSH", KEYS[2], ARGV[2])
handoff_or_wake(KEYS[3], KEYS[4], KEYS[2], KEYS[5], KEYS[6], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[4], ARGV[5])
return 1
