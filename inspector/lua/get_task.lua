-- get_task: one task's hash fields and the score that places it in its state (read only).
-- KEYS[1] task hash   KEYS[2] lease sorted set   KEYS[3] our exact due times asynqpy:{q}:due
-- ARGV[1] queue key prefix asynq:{q}:   ARGV[2] task id
-- returns {} when the hash does not exist, else {msg, state, result, pending_since, asynqpy_error, score},
--   a missing value being the integer 0. score: the scheduled/retry/archived/completed/group score, or the
--   lease expiry of an active task; for a scheduled or retry task, our exact due time when it fits the score
-- #include _due.lua
local f = redis.call("HMGET", KEYS[1], "msg", "state", "result", "pending_since", "asynqpy_error", "group")
if redis.call("EXISTS", KEYS[1]) == 0 then
  return {}
end
local state, score = f[2], false
if state == "active" then
  score = redis.call("ZSCORE", KEYS[2], ARGV[2])
elseif state == "aggregating" and f[6] then
  score = redis.call("ZSCORE", ARGV[1] .. "g:" .. f[6], ARGV[2])
elseif state and state ~= "pending" then
  score = redis.call("ZSCORE", ARGV[1] .. state, ARGV[2])
  if score and (state == "scheduled" or state == "retry") then
    local exact = redis.call("ZSCORE", KEYS[3], ARGV[2])
    if exact and exact_fits(score, exact) then score = exact end
  end
end
return {f[1] or 0, f[2] or 0, f[3] or 0, f[4] or 0, f[5] or 0, score or 0}
