-- write_server_state: the heartbeat's server info and the workers hash, rewritten each beat.
-- KEYS[1] asynq:servers:{host:pid:id}   KEYS[2] asynq:workers:{host:pid:id}
-- ARGV[1] ttl (whole s)   ARGV[2] ServerInfo bytes   ARGV[3..] pairs: task id, WorkerInfo bytes
-- returns 1
redis.call("SETEX", KEYS[1], ARGV[1], ARGV[2])
redis.call("DEL", KEYS[2])
for i = 3, #ARGV, 2 do
  redis.call("HSET", KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call("EXPIRE", KEYS[2], ARGV[1])
return 1
