-- list_tasks: one page of a state's list or sorted set with each task's hash fields (read only).
-- KEYS[1] the state's list or sorted set (or a group's sorted set)   KEYS[2] the lease sorted set
-- KEYS[3] our exact due times asynqpy:{q}:due
-- ARGV[1] "list" or "zset"   ARGV[2] start   ARGV[3] stop (LRANGE / ZRANGE indexes)   ARGV[4] task key prefix
-- ARGV[5] "1" to report the lease expiry (active tasks) as the score, "2" our exact due time where it fits the
--   score (scheduled and retry tasks)
-- returns {total, then per task: id, score, msg, state, result, pending_since, asynqpy_error}, in range order;
--   a missing value is the integer 0 (so a task hash missing from its list still gets a row)
-- #include _due.lua
local list = ARGV[1] == "list"
local total, ids
if list then
  total = redis.call("LLEN", KEYS[1])
  ids = redis.call("LRANGE", KEYS[1], ARGV[2], ARGV[3])
else
  total = redis.call("ZCARD", KEYS[1])
  ids = redis.call("ZRANGE", KEYS[1], ARGV[2], ARGV[3], "WITHSCORES")
end
local out = {total}
local step = list and 1 or 2
for i = 1, #ids, step do
  local id = ids[i]
  local score = list and 0 or ids[i + 1]
  if ARGV[5] == "1" then score = redis.call("ZSCORE", KEYS[2], id) or 0 end
  if ARGV[5] == "2" then
    local exact = redis.call("ZSCORE", KEYS[3], id)
    if exact and exact_fits(score, exact) then score = exact end
  end
  local f = redis.call("HMGET", ARGV[4] .. id, "msg", "state", "result", "pending_since", "asynqpy_error")
  out[#out + 1] = id
  out[#out + 1] = score
  for j = 1, 5 do out[#out + 1] = f[j] or 0 end
end
return out
