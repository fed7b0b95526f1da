-- done: tasks that succeeded without retention (or were revoked) are deleted and counted (asynq's Done, batched).
-- KEYS[1] active   KEYS[2] lease   KEYS[3] processed:<utc day>   KEYS[4] processed (all time)
-- ARGV[1] stats expiry (Unix s)   ARGV[2] task key prefix
-- ARGV[3..] pairs: task id, unique-lock key ('' = none)
-- returns the ids no longer held by this worker (not in lease), which were left alone
-- #include _stats.lua
local lost = {}
local n = 0
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call("ZREM", KEYS[2], id) == 0 then
    lost[#lost + 1] = id
  else
    redis.call("LREM", KEYS[1], 0, id)
    redis.call("DEL", ARGV[2] .. id)
    if ARGV[i + 1] ~= "" then
      local ukey = ARGV[i + 1]
      if redis.call("GET", ukey) == id then
        redis.call("DEL", ukey)
      end
    end
    n = n + 1
  end
end
if n > 0 then
  count_daily(KEYS[3], n, ARGV[1])
  count_totals({KEYS[4]}, n)
end
return lost
