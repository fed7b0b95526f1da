-- job_cancel: ask a job to stop, judged and written in one step, so a job that finishes meanwhile stays finished.
-- KEYS[1] the job's hash
-- ARGV[1] now (Unix s)   ARGV[2] seconds without progress after which its runner is taken for gone
-- returns 0 no such job, 1 finished already (unchanged), 2 canceled at once (stalled: nobody runs it; a chunk
-- its runner sent may be uncounted, until that runner comes back and counts it: job_progress),
-- 3 canceling (its runner stops after its current chunk)
local status, updated = unpack(redis.call("HMGET", KEYS[1], "status", "updated_at"))
if not status then return 0 end
if status == "done" or status == "canceled" or status == "failed" then return 1 end
if tonumber(ARGV[1]) - (tonumber(updated) or 0) > tonumber(ARGV[2]) then
  redis.call("HSET", KEYS[1], "status", "canceled", "error", "stalled: its process had stopped",
             "updated_at", ARGV[1], "uncounted", "1")
  return 2
end
redis.call("HSET", KEYS[1], "status", "canceling")
return 3
