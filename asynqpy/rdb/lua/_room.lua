-- _room.lua: a fragment (pasted at "-- #include _room.lua"): producer backpressure. A queue may have a size limit
-- and/or an oldest-task age limit in asynqpy:{q}:qlimit (max_size: tasks pending (waiting on a limit too) + scheduled +
-- retry + active + aggregating (in a group, as asynq counts them in a queue's size: they will run, as one task of
-- each aggregation); max_latency: seconds the oldest pending task has waited), written by asynqpy/backpressure.py. An enqueue past
-- either is refused atomically: the script returns "full:<size|latency>:<limit>:<current>" and writes nothing.
-- Each refusal is counted in asynqpy:{q}:refused (for metrics and alerts). base: "asynq:{q}:"; adding: tasks
-- this call adds that are not in those lists yet (0: enqueue_many checks before each task, after the last LPUSH).
-- The aggregating tasks cost one ZCARD per group (asynq's count: a few us per group), so they are counted at most
-- once a second per queue (once per groups/1000 seconds past 1000 groups, so that counting stays a small share of
-- the server's time) and the count kept meanwhile in asynqpy:{q}:aggn, which add_to_group.lua increments: tasks
-- leaving a group (aggregated, deleted) still count until the next count (a refusal errs on the full side), and
-- a Go producer's grouped tasks count from the next count.
local function aggregating(base, mine)
  local n = tonumber(redis.call("GET", mine .. "aggn"))
  if n then
    return n
  end
  n = 0
  local groups = redis.call("SMEMBERS", base .. "groups")
  for _, g in ipairs(groups) do
    n = n + redis.call("ZCARD", base .. "g:" .. g)
  end
  redis.call("SET", mine .. "aggn", n, "PX", math.max(1000, #groups))
  return n
end

local function refusal(base, now_ms, adding)
  local mine = "asynqpy:" .. string.sub(base, 7)
  local lim = redis.call("HMGET", mine .. "qlimit", "max_size", "max_latency")
  local max_size, max_latency = tonumber(lim[1]), tonumber(lim[2])
  if max_size then
    local size = redis.call("LLEN", base .. "pending") + redis.call("ZCARD", base .. "scheduled") +
                 redis.call("ZCARD", base .. "retry") + redis.call("LLEN", base .. "active") + adding +
                 (tonumber(redis.call("GET", mine .. "lwaitn")) or 0)  -- and those waiting on a limit
    if size < max_size then  -- (full without them: no need to count them)
      size = size + aggregating(base, mine)
    end
    if size >= max_size then
      redis.call("INCR", mine .. "refused")
      return "full:size:" .. max_size .. ":" .. size
    end
  end
  if max_latency then
    local oldest = redis.call("LINDEX", base .. "pending", -1)
    local since = oldest and redis.call("HGET", base .. "t:" .. oldest, "pending_since")
    if since and #since > 6 then
      local waited = (now_ms - tonumber(string.sub(since, 1, -7))) / 1000
      if waited > max_latency then
        redis.call("INCR", mine .. "refused")
        return "full:latency:" .. max_latency .. ":" .. string.format("%.3f", waited)
      end
    end
  end
  return nil
end
