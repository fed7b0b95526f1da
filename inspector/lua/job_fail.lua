-- job_fail: end a job as failed with its error, unless it has ended already (then it keeps its status).
-- KEYS[1] the job's hash
-- ARGV[1] the error   ARGV[2] now (Unix s)   ARGV[3] "1" when a chunk it sent may be uncounted (its counts are
-- then lower bounds)
-- returns 1 marked failed, 0 ended already or gone
local status = redis.call("HGET", KEYS[1], "status")
if status ~= "running" and status ~= "canceling" then return 0 end
redis.call("HSET", KEYS[1], "status", "failed", "error", ARGV[1], "updated_at", ARGV[2])
if ARGV[3] == "1" then redis.call("HSET", KEYS[1], "uncounted", "1") end
return 1
