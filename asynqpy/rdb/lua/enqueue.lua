-- enqueue: a new task goes to pending (asynq's Enqueue, plus our wake-up signal).
-- KEYS[1] task hash   KEYS[2] pending list
-- ARGV[1] msg bytes   ARGV[2] task id   ARGV[3] now (Unix ns)   ARGV[4] wake channel ('' = none)   ARGV[5] queue
-- returns 1 enqueued, 0 a task with this id exists (TaskIDConflict)
if redis.call("EXISTS", KEYS[1]) == 1 then
  return 0
end
redis.call("HSET", KEYS[1], "msg", ARGV[1], "state", "pending", "pending_since", ARGV[3])
redis.call("LPUSH", KEYS[2], ARGV[2])
if ARGV[4] ~= "" then
  redis.call("PUBLISH", ARGV[4], ARGV[5])
end
return 1
