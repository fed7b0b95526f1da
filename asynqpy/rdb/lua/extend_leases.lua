-- extend_leases: the heartbeat moves the lease expiry of tasks this server holds (only those still leased).
-- KEYS[1] asynq:{q}:lease
-- ARGV[1] new expiry (lease score)   ARGV[2..] task ids
-- returns how many leases were still there
local n = 0
for i = 2, #ARGV do
  if redis.call("ZSCORE", KEYS[1], ARGV[i]) then
    redis.call("ZADD", KEYS[1], "XX", ARGV[1], ARGV[i])
    n = n + 1
  end
end
return n
