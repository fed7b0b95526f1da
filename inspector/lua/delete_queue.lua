-- delete_queue: remove a queue's task structures and task hashes (asynq's DeleteQueue); the caller then
-- SREMs the queue from asynq:queues. Large queues are emptied in chunks first (code -3), so this stays short.
-- KEYS[1] pending   KEYS[2] active   KEYS[3] scheduled   KEYS[4] retry   KEYS[5] archived   KEYS[6] lease
-- KEYS[7] completed   KEYS[8] groups set   KEYS[9] our exact due times asynqpy:{q}:due
-- ARGV[1] force "1"/"0"   ARGV[2] task key prefix   ARGV[3] group key prefix   ARGV[4] most task hashes to delete
-- returns 1 deleted; -1 not empty (no force); -2 has active tasks (force); -3 more than ARGV[4] tasks left;
-- -4 (force) ARGV[4] of the tasks waiting on a limit were deleted, more are left
-- The tasks waiting on a limit (asynqpy/rdb/lua/_limits.lua: out of pending, in the wait lists of asynqpy:{q}:)
-- count as pending: else a queue holding only those was "empty", deleted without force, and they stayed behind,
-- to start when the queue's name was used again.
local lp = "asynqpy:" .. string.sub(KEYS[1], 7, -8)
local waiting = tonumber(redis.call("GET", lp .. "lwaitn")) or 0
local groups = redis.call("SMEMBERS", KEYS[8])
local aggregating = 0
for _, g in ipairs(groups) do aggregating = aggregating + redis.call("ZCARD", ARGV[3] .. g) end
local sizes = {redis.call("LLEN", KEYS[1]), redis.call("LLEN", KEYS[2]), redis.call("ZCARD", KEYS[3]),
  redis.call("ZCARD", KEYS[4]), redis.call("ZCARD", KEYS[5])}
if ARGV[1] ~= "1" then
  if sizes[1] + sizes[2] + sizes[3] + sizes[4] + sizes[5] + aggregating + math.max(waiting, 0) > 0 then return -1 end
elseif sizes[2] > 0 then
  return -2
end
if redis.call("EXISTS", lp .. "lwaiting") == 1 then  -- (force) the waiting tasks, ARGV[4] per call
  local budget = tonumber(ARGV[4])
  for _, member in ipairs(redis.call("ZRANGE", lp .. "lwaiting", 0, -1)) do
    local wl = lp .. "lwait:" .. member
    while budget > 0 do
      local id = redis.call("RPOP", wl)
      if not id then
        break
      end
      redis.call("DECR", lp .. "lwaitn")
      redis.call("DEL", ARGV[2] .. id)
      budget = budget - 1
    end
    if redis.call("LLEN", wl) > 0 then
      return -4
    end
    redis.call("ZREM", lp .. "lwaiting", member)
  end
end
local completed = redis.call("ZCARD", KEYS[7])
if sizes[1] + sizes[3] + sizes[4] + sizes[5] + aggregating + completed > tonumber(ARGV[4]) then return -3 end
local function drop(ids)
  for _, id in ipairs(ids) do redis.call("DEL", ARGV[2] .. id) end
end
drop(redis.call("LRANGE", KEYS[1], 0, -1))
for i = 3, 5 do drop(redis.call("ZRANGE", KEYS[i], 0, -1)) end
drop(redis.call("ZRANGE", KEYS[7], 0, -1))
for _, g in ipairs(groups) do
  drop(redis.call("ZRANGE", ARGV[3] .. g, 0, -1))
  redis.call("DEL", ARGV[3] .. g)
end
redis.call("DEL", KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9], lp .. "lwaitn")
return 1
