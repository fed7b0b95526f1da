-- index_live: the members of an index sorted set whose expiry is not past.
-- KEYS[1] the index   ARGV[1] now (Unix s)
-- returns the members
return redis.call("ZRANGEBYSCORE", KEYS[1], ARGV[1], "+inf")
