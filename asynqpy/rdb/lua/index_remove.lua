-- index_remove: take a member out of an index sorted set (a stopping server or scheduler).
-- KEYS[1] the index   ARGV[1] member
-- returns 1 when it was there
return redis.call("ZREM", KEYS[1], ARGV[1])
