-- done: tasks that succeeded without retention (or were revoked) are deleted and counted (asynq's Done, batched).
-- KEYS[1] active   KEYS[2] lease   KEYS[3] processed:<utc day>   KEYS[4] processed (all time)
-- ARGV[1] stats expiry (Unix s)   ARGV[2] task key prefix
-- ARGV[3..] pairs: task id, unique-lock key ('' = none)
-- returns the ids no longer held by this worker (not in lease), which were left alone
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
  if redis.call("INCRBY", KEYS[3], n) == n then
    redis.call("EXPIREAT", KEYS[3], ARGV[1])
  end
  local r = redis.pcall("INCRBY", KEYS[4], n)
  if type(r) == "table" and r.err then
    redis.call("SET", KEYS[4], n)
  end
end
return lost
