-- retry: an active task failed and waits in retry until its next attempt (asynq's Retry).
-- KEYS[1] task hash   KEYS[2] active   KEYS[3] lease   KEYS[4] retry zset
-- KEYS[5] processed:<day>   KEYS[6] failed:<day>   KEYS[7] processed (all time)   KEYS[8] failed (all time)
-- KEYS[9] our exact due times asynqpy:{q}:due
-- ARGV[1] task id   ARGV[2] msg (retried, error_msg, last_failed_at updated)   ARGV[3] retry at (whole Unix s,
-- rounded up)   ARGV[4] stats expiry (Unix s)   ARGV[5] is failure "1"/"0"
-- ARGV[6] lease cutoff: '' always, else only when the lease score is <= this (the recoverer's check)
-- ARGV[7] retry at, exact (Unix s, ms)   ARGV[8] exact times before this are stale (now - 60 s)
-- returns 1 moved, 0 not held by anyone any more (not in lease, or the lease was renewed)
-- #include _stats.lua
-- #include _finish.lua
-- #include _due.lua
if not leave_active(KEYS[2], KEYS[3], ARGV[1], ARGV[6]) then
  return 0
end
put_due(KEYS[4], KEYS[9], ARGV[1], ARGV[3], ARGV[7], ARGV[8])
redis.call("HSET", KEYS[1], "msg", ARGV[2], "state", "retry")
if ARGV[5] == "1" then
  count_daily(KEYS[5], 1, ARGV[4])
  count_daily(KEYS[6], 1, ARGV[4])
  count_totals({KEYS[7], KEYS[8]}, 1)
end
return 1
