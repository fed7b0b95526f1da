-- server_time: the Redis server's clock, as TIME answers it (run as a script so that it goes through the runners).
-- returns {Unix s, microseconds}
return redis.call("TIME")
