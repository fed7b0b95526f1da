-- job_create: record a new background job and list it, dropping the oldest beyond the number kept.
-- KEYS[1] the job's hash (asynqpy:{jobs}:job:<id>)   KEYS[2] the jobs index (asynqpy:{jobs}, score: start time)
-- ARGV[1] job id   ARGV[2] now (Unix s)   ARGV[3] the hash's TTL (s)   ARGV[4] jobs kept
-- ARGV[5..] field, value, field, value, ... of the hash
-- returns 1
redis.call("HSET", KEYS[1], unpack(ARGV, 5))
redis.call("EXPIRE", KEYS[1], ARGV[3])
redis.call("ZADD", KEYS[2], ARGV[2], ARGV[1])
redis.call("ZREMRANGEBYRANK", KEYS[2], 0, -(tonumber(ARGV[4]) + 1))
return 1
