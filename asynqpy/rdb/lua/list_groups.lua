-- list_groups: the groups of a queue that hold aggregating tasks.
-- KEYS[1] asynq:{q}:groups
-- returns the group names
return redis.call("SMEMBERS", KEYS[1])
