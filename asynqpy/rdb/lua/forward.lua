-- forward: due scheduled and retry tasks go to pending, or to their group (asynq's forwarder, both sets at once);
-- each one that reaches pending goes straight to an idle worker of ours when one waits (see _handoff.lua),
-- and if any is left in pending, idle workers are woken.
-- A task is due when its asynq score (whole seconds, or a fractional one written by an older asynqpy) is <= now,
-- or, for the tasks of the current second, when its exact due time in KEYS[8] has passed (see _due.lua).
-- KEYS[1] scheduled zset   KEYS[2] retry zset   KEYS[3] pending list
-- KEYS[4] waiters zset   KEYS[5] paused   KEYS[6] active   KEYS[7] lease   KEYS[8] our exact due times
-- ARGV[1] now (Unix s, ms)   ARGV[2] task key prefix   ARGV[3] now (Unix ns)   ARGV[4] group key prefix
-- ARGV[5] batch size   ARGV[6] lease expiry (whole Unix s)   ARGV[7] hand-off key prefix   ARGV[8] wake channel
-- ('' = none)   ARGV[9] queue   ARGV[10] now (whole Unix s: the score of a task added to its group)
-- returns {moved, the next due time as a string or ''}: the caller sleeps until that time
-- #include _handoff.lua
-- #include _due.lua
local moved = 0
local waiting = 0
local limit = tonumber(ARGV[5])
local function move(src, id)
  local key = ARGV[2] .. id
  local group = redis.call("HGET", key, "group")
  if group and group ~= "" then
    redis.call("ZADD", ARGV[4] .. group, ARGV[10], id)
    redis.call("HSET", key, "state", "aggregating")
  else
    redis.call("LPUSH", KEYS[3], id)
    redis.call("HSET", key, "state", "pending", "pending_since", ARGV[3])
    if not handoff(KEYS[4], KEYS[5], KEYS[3], KEYS[6], KEYS[7], ARGV[1], ARGV[6], ARGV[2], ARGV[7]) then
      waiting = waiting + 1
    end
  end
  redis.call("ZREM", src, id)
  redis.call("ZREM", KEYS[8], id)
  moved = moved + 1
end
for k = 1, 2 do
  for _, id in ipairs(redis.call("ZRANGEBYSCORE", KEYS[k], "-inf", ARGV[1], "LIMIT", 0, limit - moved)) do
    move(KEYS[k], id)
  end
end
if moved < limit then
  local exact = redis.call("ZRANGEBYSCORE", KEYS[8], "-inf", ARGV[1], "WITHSCORES", "LIMIT", 0, limit - moved)
  for i = 1, #exact, 2 do
    local id, src = exact[i], nil
    for k = 1, 2 do
      local score = redis.call("ZSCORE", KEYS[k], id)
      if score and exact_fits(score, exact[i + 1]) then
        src = KEYS[k]
      end
    end
    if src then
      move(src, id)
    else
      redis.call("ZREM", KEYS[8], id)  -- no longer waiting, or scored again by Go: its score rules
    end
  end
end
if waiting > 0 and ARGV[8] ~= "" then
  redis.call("PUBLISH", ARGV[8], ARGV[9])
end
local nextdue = ""
for k = 1, 2 do
  local first = redis.call("ZRANGE", KEYS[k], 0, 0, "WITHSCORES")
  if first[2] and (nextdue == "" or tonumber(first[2]) < tonumber(nextdue)) then
    nextdue = first[2]
  end
end
local first = redis.call("ZRANGE", KEYS[8], 0, 0, "WITHSCORES")
if first[2] and (nextdue == "" or tonumber(first[2]) < tonumber(nextdue)) then
  nextdue = first[2]
end
return {moved, nextdue}
