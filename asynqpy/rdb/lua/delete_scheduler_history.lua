-- delete_scheduler_history: drop the history of an entry that no live scheduler lists any more.
-- KEYS[1] asynq:scheduler_history:<entry id>
-- returns 1 when it existed
return redis.call("DEL", KEYS[1])
