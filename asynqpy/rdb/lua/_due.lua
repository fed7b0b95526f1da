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

-- schedule_due: put_due for a new task due at `at` (Unix s, ms: process_at, absolute as the user gave it) or,
-- when at is '', in_ms milliseconds after now (process_in, by the Redis server's clock: see _clock.lua).
-- Exact times more than stale_s seconds before now are dropped.
local function ms_text(ms)
  return string.format("%d.%03d", math.floor(ms / 1000), ms % 1000)
end

local function schedule_due(zset, exact_key, id, at, in_ms, stale_s, now)
  -- (now rounded up: now.ms + in_ms would make a task due up to 1 ms before now + in_ms)
  local ms = at ~= "" and math.floor(tonumber(at) * 1000 + 0.5) or now.ms_up + tonumber(in_ms)
  local score = math.floor(ms / 1000)
  if ms % 1000 ~= 0 then
    score = score + 1
  end
  put_due(zset, exact_key, id, score, ms_text(ms), ms_text(now.ms - tonumber(stale_s) * 1000))
end
