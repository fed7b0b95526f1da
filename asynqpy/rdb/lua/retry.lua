-- retry: an active task failed and waits in retry until its next attempt (asynq's Retry).
-- KEYS[1] task hash   KEYS[2] active   KEYS[3] lease   KEYS[4] retry zset
-- KEYS[5] processed:<day>   KEYS[6] failed:<day>   KEYS[7] processed (all time)   KEYS[8] failed (all time)
-- ARGV[1] task id   ARGV[2] msg (retried, error_msg, last_failed_at updated)   ARGV[3] retry at (Unix s)
-- ARGV[4] stats expiry (Unix s)   ARGV[5] is failure "1"/"0"
-- ARGV[6] lease cutoff: '' always, else only when the lease score is <= this (the recoverer's check)
-- returns 1 moved, 0 not held by anyone any more (not in lease, or the lease was renewed)
-- #include _stats.lua
local score = redis.call("ZSCORE", KEYS[3], ARGV[1])
if not score or (ARGV[6] ~= "" and tonumber(score) > tonumber(ARGV[6])) then
  return 0
end
redis.call("ZREM", KEYS[3], ARGV[1])
redis.call("LREM", KEYS[2], 0, ARGV[1])
redis.call("ZADD", KEYS[4], ARGV[3], ARGV[1])
redis.call("HSET", KEYS[1], "msg", ARGV[2], "state", "retry")
if ARGV[5] == "1" then
  count_daily(KEYS[5], 1, ARGV[4])
  count_daily(KEYS[6], 1, ARGV[4])
  count_totals({KEYS[7], KEYS[8]}, 1)
end
return 1
