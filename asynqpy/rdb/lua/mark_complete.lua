-- mark_complete: tasks that succeeded with retention move to completed (asynq's MarkAsComplete, batched).
-- KEYS[1] active   KEYS[2] lease   KEYS[3] completed   KEYS[4] processed:<utc day>   KEYS[5] processed (all time)
-- ARGV[1] stats expiry (Unix s)   ARGV[2] task key prefix
-- ARGV[3..] quads: task id, expiry (Unix s), msg with completed_at set, unique-lock key ('' = none)
-- returns the ids no longer held by this worker, which were left alone
-- #include _stats.lua
local lost = {}
local n = 0
for i = 3, #ARGV, 4 do
  local id = ARGV[i]
  if redis.call("ZREM", KEYS[2], id) == 0 then
    lost[#lost + 1] = id
  else
    redis.call("LREM", KEYS[1], 0, id)
    redis.call("ZADD", KEYS[3], ARGV[i + 1], id)
    redis.call("HSET", ARGV[2] .. id, "msg", ARGV[i + 2], "state", "completed")
    if ARGV[i + 3] ~= "" then
      local ukey = ARGV[i + 3]
      if redis.call("GET", ukey) == id then
        redis.call("DEL", ukey)
      end
    end
    n = n + 1
  end
end
if n > 0 then
  count_daily(KEYS[4], n, ARGV[1])
  count_totals({KEYS[5]}, n)
end
return lost
