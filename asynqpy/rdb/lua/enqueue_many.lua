-- enqueue_many: several new tasks of one queue go to pending (asynq's Enqueue, one by one), then idle workers of
-- ours get the oldest pending tasks (one each), or workers are woken. The plain enqueue_many's script: one call
-- per run of tasks instead of one per task. Times are by the Redis server's clock (see _clock.lua).
-- KEYS[1] pending list   KEYS[2] waiters zset   KEYS[3] paused   KEYS[4] active   KEYS[5] lease
-- ARGV[1] wake channel ('' = none)   ARGV[2] queue   ARGV[3] hand-off lease (s)   ARGV[4] task key prefix
-- ARGV[5] hand-off key prefix   ARGV[6], ARGV[7], ...: task id, msg bytes, for each task
-- returns one code per task: 1 enqueued, 0 a task with this id exists (TaskIDConflict), "full:..." refused by
-- the queue's backpressure limit (see _room.lua; the tasks before it stay enqueued)
-- #include _clock.lua
-- #include _room.lua
-- #include _limits.lua
-- #include _handoff.lua
local now = clock("")
local lease_expiry = math.ceil(now.ms / 1000 + tonumber(ARGV[3]))
local base = string.sub(KEYS[1], 1, -8)
-- A queue without a limit (no qlimit hash: nothing here writes one) refuses nothing: no check per task, and
-- the new ids go to pending in one LPUSH (in the same order as one LPUSH each). With a limit, each task is
-- checked after the ones before it are pushed, as one enqueue each would be.
local limited = redis.call("EXISTS", "asynqpy:" .. string.sub(base, 7) .. "qlimit") == 1
local out = {}
local ids = {}
local added = 0
for i = 6, #ARGV, 2 do
  local key = ARGV[4] .. ARGV[i]
  local full = limited and refusal(base, now.ms, 0)
  if full then
    out[#out + 1] = full
  elseif redis.call("EXISTS", key) == 1 then
    out[#out + 1] = 0
  else
    redis.call("HSET", key, "msg", ARGV[i + 1], "state", "pending", "pending_since", now.ns)
    if limited then
      redis.call("LPUSH", KEYS[1], ARGV[i])
    else
      ids[#ids + 1] = ARGV[i]
    end
    out[#out + 1] = 1
    added = added + 1
  end
end
if #ids > 0 then
  redis.call("LPUSH", KEYS[1], unpack(ids))
end
local handed = 0
while handed < added and handoff(KEYS[2], KEYS[3], KEYS[1], KEYS[4], KEYS[5], now.s, lease_expiry, ARGV[4], ARGV[5]) do
  handed = handed + 1
end
if added > handed and ARGV[1] ~= "" then
  redis.call("PUBLISH", ARGV[1], ARGV[2])
end
return out
