-- record_scheduler_event: add one enqueue event to a scheduler entry's history, keeping the newest ARGV[3].
-- KEYS[1] asynq:scheduler_history:<entry id>
-- ARGV[1] protobuf SchedulerEnqueueEvent bytes   ARGV[2] score (enqueue time, Unix s)   ARGV[3] cap
-- returns 1
redis.call("ZADD", KEYS[1], ARGV[2], ARGV[1])
redis.call("ZREMRANGEBYRANK", KEYS[1], 0, -(tonumber(ARGV[3]) + 1))
return 1
