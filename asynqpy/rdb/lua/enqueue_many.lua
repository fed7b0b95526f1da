-- enqueue_many: several new tasks of one queue go to pending (asynq's Enqueue, one by one), then idle workers of
-- ours get the oldest pending tasks (one each), or workers are woken. The plain enqueue_many's script: one call
-- per run of tasks instead of one per task.
-- KEYS[1] pending list   KEYS[2] waiters zset   KEYS[3] paused   KEYS[4] active   KEYS[5] lease
-- ARGV[1] now (Unix ns)   ARGV[2] wake channel ('' = none)   ARGV[3] queue   ARGV[4] now (Unix s)
-- ARGV[5] lease expiry (Unix s)   ARGV[6] task key prefix   ARGV[7] hand-off key prefix
-- ARGV[8], ARGV[9], ...: task id, msg bytes, for each task
-- returns one code per task: 1 enqueued, 0 a task with this id exists (TaskIDConflict)
-- #include _handoff.lua
local out = {}
local added = 0
for i = 8, #ARGV, 2 do
  local key = ARGV[6] .. ARGV[i]
  if redis.call("EXISTS", key) == 1 then
    out[#out + 1] = 0
  else
    redis.call("HSET", key, "msg", ARGV[i + 1], "state", "pending", "pending_since", ARGV[1])
    redis.call("LPUSH", KEYS[1], ARGV[i])
    out[#out + 1] = 1
    added = added + 1
  end
end
local handed = 0
while handed < added and handoff(KEYS[2], KEYS[3], KEYS[1], KEYS[4], KEYS[5], ARGV[4], ARGV[5], ARGV[6], ARGV[7]) do
  handed = handed + 1
end
if added > handed and ARGV[2] ~= "" then
  redis.call("PUBLISH", ARGV[2], ARGV[3])
end
return out
