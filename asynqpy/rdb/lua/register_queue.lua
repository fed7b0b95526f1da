-- register_queue: a producer registers its queue where asynq's tools list queues.
-- KEYS[1] asynq:queues   ARGV[1] queue name
-- returns 1 when the queue was new
return redis.call("SADD", KEYS[1], ARGV[1])
