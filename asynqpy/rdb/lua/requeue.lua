-- requeue: an active task goes back to the front of pending (asynq's Requeue, used at shutdown).
-- KEYS[1] active   KEYS[2] lease   KEYS[3] pending   KEYS[4] task hash
-- ARGV[1] task id   ARGV[2] now (Unix ns): its pending_since, as it is pending again from now on
-- returns 1 requeued, 0 not held any more
if redis.call("ZREM", KEYS[2], ARGV[1]) == 0 then
  return 0
end
redis.call("LREM", KEYS[1], 0, ARGV[1])
redis.call("RPUSH", KEYS[3], ARGV[1])
redis.call("HSET", KEYS[4], "state", "pending", "pending_since", ARGV[2])
return 1
