-- _stats.lua: a fragment (pasted at "-- #include _stats.lua"): counting processed and failed tasks as asynq does.
-- A daily key gets its 90-day expiry when the day's first count creates it; the all-time counters of a queue
-- start again together, at n, when one of them would overflow int64 (asynq resets them at MaxInt64).
local function count_daily(key, n, expire_at)
  if redis.call("INCRBY", key, n) == n then
    redis.call("EXPIREAT", key, expire_at)
  end
end

local function count_totals(totals, n)
  for _, key in ipairs(totals) do
    local r = redis.pcall("INCRBY", key, n)
    if type(r) == "table" and r.err then
      for _, k in ipairs(totals) do
        redis.call("SET", k, n)
      end
      return
    end
  end
end

-- n tasks processed (none failed): the day's and the all-time counters.
local function count_processed(daily, total, n, expire_at)
  if n > 0 then
    count_daily(daily, n, expire_at)
    count_totals({total}, n)
  end
end
