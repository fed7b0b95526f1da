-- archive: an active task that failed for good moves to archived, trimmed by age and size (asynq's Archive).
-- KEYS[1] task hash   KEYS[2] active   KEYS[3] lease   KEYS[4] archived zset
-- KEYS[5] processed:<day>   KEYS[6] failed:<day>   KEYS[7] processed (all time)   KEYS[8] failed (all time)
-- ARGV[1] task id   ARGV[2] msg (error_msg, last_failed_at updated)   ARGV[3] now (Unix s)
-- ARGV[4] age cutoff = now - 90 days (Unix s)   ARGV[5] max archive size (10000)   ARGV[6] stats expiry (Unix s)
-- ARGV[7] task key prefix   ARGV[8] lease cutoff ('' always, else only when the lease score is <= it)
-- ARGV[9] a readable error kept beside a msg that could not be decoded ('' = none)
-- returns 1 archived, 0 not held by anyone any more
-- #include _stats.lua
local score = redis.call("ZSCORE", KEYS[3], ARGV[1])
if not score or (ARGV[8] ~= "" and tonumber(score) > tonumber(ARGV[8])) then
  return 0
end
redis.call("ZREM", KEYS[3], ARGV[1])
redis.call("LREM", KEYS[2], 0, ARGV[1])
redis.call("ZADD", KEYS[4], ARGV[3], ARGV[1])
for _, id in ipairs(redis.call("ZRANGEBYSCORE", KEYS[4], "-inf", ARGV[4])) do
  redis.call("DEL", ARGV[7] .. id)
end
redis.call("ZREMRANGEBYSCORE", KEYS[4], "-inf", ARGV[4])
local cap = -tonumber(ARGV[5])
for _, id in ipairs(redis.call("ZRANGE", KEYS[4], 0, cap)) do
  redis.call("DEL", ARGV[7] .. id)
end
redis.call("ZREMRANGEBYRANK", KEYS[4], 0, cap)
redis.call("HSET", KEYS[1], "msg", ARGV[2], "state", "archived")
if ARGV[9] ~= "" then
  redis.call("HSET", KEYS[1], "asynqpy_error", ARGV[9])
end
count_daily(KEYS[5], 1, ARGV[6])
count_daily(KEYS[6], 1, ARGV[6])
count_totals({KEYS[7], KEYS[8]}, 1)
return 1
