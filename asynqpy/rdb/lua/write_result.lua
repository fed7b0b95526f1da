-- write_result: a handler stores its result in its task's hash (not for a task deleted meanwhile).
-- KEYS[1] asynq:{q}:t:<id>   ARGV[1] result bytes
-- returns 1, or 0 when the task no longer exists
if redis.call("EXISTS", KEYS[1]) == 0 then
  return 0
end
redis.call("HSET", KEYS[1], "result", ARGV[1])
return 1
