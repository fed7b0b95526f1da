-- index_add: (re)announce a member of an index sorted set (asynq:servers, asynq:workers, asynq:schedulers).
-- KEYS[1] the index   ARGV[1] score (the member's expiry, Unix s)   ARGV[2] member
-- returns 1
redis.call("ZADD", KEYS[1], ARGV[1], ARGV[2])
return 1
