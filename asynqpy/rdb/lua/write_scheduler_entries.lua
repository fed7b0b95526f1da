-- write_scheduler_entries: a scheduler's heartbeat rewrites its entry list where asynq's Inspector reads it.
-- KEYS[1] asynq:schedulers:{<scheduler id>} list   KEYS[2] asynqpy:schedulers:{<scheduler id>} (says: an asynqpy
-- scheduler, which honours pause; Go's write no such key)
-- ARGV[1] ttl (s)   ARGV[2] the scheduler's location (IANA zone), the marker's value
-- ARGV[3..] protobuf SchedulerEntry bytes, one per entry
-- returns the number of entries written
redis.call("DEL", KEYS[1], KEYS[2])
for i = 3, #ARGV do
  redis.call("LPUSH", KEYS[1], ARGV[i])
end
if #ARGV > 2 then
  redis.call("EXPIRE", KEYS[1], ARGV[1])
  redis.call("SET", KEYS[2], ARGV[2], "EX", ARGV[1])
end
return #ARGV - 2
