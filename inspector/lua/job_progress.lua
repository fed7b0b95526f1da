-- job_progress: count a chunk a job's runner did and say whether to go on: a requested cancel, the job's end
-- (its total reached, or its state emptied) and a cancel of a stalled job are judged here, in one step.
-- KEYS[1] the job's hash
-- ARGV[1] tasks taken   ARGV[2] tasks changed   ARGV[3] now (Unix s)   ARGV[4] "1" when the state is empty
-- ARGV[5] the chunk's sequence number (0: a heartbeat, nothing to count)
-- A chunk is counted once: one numbered at or below the last counted (its count was sent again after a lost
-- reply) counts nothing. A job canceled as stalled while its runner waited for Redis still counts the chunk the
-- runner was sending, and is then known to have no chunk left uncounted.
-- returns the status now: "running" (go on), "canceled", "done", or the final status another party set;
-- false when the job's hash is gone (expired or deleted)
local status, last = unpack(redis.call("HMGET", KEYS[1], "status", "seq"))
if not status then return false end
local seq = tonumber(ARGV[5])
if seq > (tonumber(last) or 0) then
  redis.call("HINCRBY", KEYS[1], "done", ARGV[1])
  redis.call("HINCRBY", KEYS[1], "changed", ARGV[2])
  redis.call("HSET", KEYS[1], "seq", seq)
end
if status ~= "running" and status ~= "canceling" then
  if status == "canceled" then redis.call("HDEL", KEYS[1], "uncounted") end
  return status
end
redis.call("HSET", KEYS[1], "updated_at", ARGV[3])
if status == "canceling" then
  redis.call("HSET", KEYS[1], "status", "canceled")
  return "canceled"
end
local done = tonumber(redis.call("HGET", KEYS[1], "done")) or 0
local total = tonumber(redis.call("HGET", KEYS[1], "total")) or 0
if ARGV[4] == "1" or done >= total then
  redis.call("HSET", KEYS[1], "status", "done", "done", math.max(done, total))
  return "done"
end
return "running"
