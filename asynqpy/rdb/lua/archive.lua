-- archive: an active task that failed for good moves to archived, trimmed by age and size (asynq's Archive).
-- KEYS[1] task hash   KEYS[2] active   KEYS[3] lease   KEYS[4] archived zset
-- KEYS[5] processed:<day>   KEYS[6] failed:<day>   KEYS[7] processed (all time)   KEYS[8] failed (all time)
-- ARGV[1] task id   ARGV[2] msg (error_msg, last_failed_at updated)   ARGV[3] now (whole Unix s)
-- ARGV[4] age cutoff = now - 90 days (Unix s)   ARGV[5] max archive size (10000)   ARGV[6] stats expiry (Unix s)
-- ARGV[7] task key prefix   ARGV[8] lease cutoff ('' always, else only when the lease score is <= it)
-- ARGV[9] a readable error kept beside a msg that could not be decoded ('' = none)
-- returns 1 archived, 0 not held by anyone any more
-- #include _stats.lua
-- #include _finish.lua
-- #include _archive.lua
if not leave_active(KEYS[2], KEYS[3], ARGV[1], ARGV[8]) then
  return 0
end
redis.call("ZADD", KEYS[4], ARGV[3], ARGV[1])
trim_archive(KEYS[4], ARGV[7], ARGV[4], ARGV[5])
redis.call("HSET", KEYS[1], "msg", ARGV[2], "state", "archived")
if ARGV[9] ~= "" then
  redis.call("HSET", KEYS[1], "asynqpy_error", ARGV[9])
end
count_daily(KEYS[5], 1, ARGV[6])
count_daily(KEYS[6], 1, ARGV[6])
count_totals({KEYS[7], KEYS[8]}, 1)
return 1
