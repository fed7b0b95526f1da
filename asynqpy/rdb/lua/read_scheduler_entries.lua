-- read_scheduler_entries: a scheduler's published entry list.
-- KEYS[1] asynq:schedulers:{<scheduler id>}
-- returns the protobuf SchedulerEntry bytes
return redis.call("LRANGE", KEYS[1], 0, -1)
