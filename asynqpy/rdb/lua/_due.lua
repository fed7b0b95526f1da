-- _due.lua: a fragment (pasted at "-- #include _due.lua"): the due times of scheduled and retry tasks.
-- asynq's sorted sets hold whole Unix seconds, rounded up from the due time so that no Go forwarder starts a
-- task early; the exact due time (milliseconds) goes beside it in our own sorted set asynqpy:{q}:due, where
-- Go never looks, so our forwarder can start the task on time. An exact time counts only while it lies in
-- the second its asynq score names (score - 1 < exact <= score): a task that Go moved and scored again
-- meanwhile is due at its score.
-- put_due also drops the exact times that passed before stale_before: their tasks were moved by Go (a Go
-- forwarder, or Go's Inspector) where no server of ours forwards, or are due by their score anyway.
local function put_due(zset, exact_key, id, score, exact, stale_before)
  redis.call("ZADD", zset, score, id)
  redis.call("ZADD", exact_key, exact, id)
  redis.call("ZREMRANGEBYSCORE", exact_key, "-inf", "(" .. stale_before)
end

local function exact_fits(score, exact)
  local s, e = tonumber(score), tonumber(exact)
  return e <= s and e > s - 1
end
