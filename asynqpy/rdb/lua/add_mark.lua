-- add_mark: record a deploy mark (a labelled instant) and forget the oldest beyond a cap and an age.
-- KEYS[1] asynqpy:{types}:marks
-- ARGV[1] the mark (JSON)   ARGV[2] its time (Unix s)   ARGV[3] cap   ARGV[4] drop marks older than this (Unix s)
-- returns 1
redis.call("ZADD", KEYS[1], ARGV[2], ARGV[1])
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", "(" .. ARGV[4])
redis.call("ZREMRANGEBYRANK", KEYS[1], 0, -(tonumber(ARGV[3]) + 1))
return 1
