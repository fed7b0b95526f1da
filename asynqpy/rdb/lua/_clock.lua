-- _clock.lua: a fragment (pasted at "-- #include _clock.lua"): "now" by the Redis server's clock (TIME), so
-- that due times, ticks and leases follow one clock whatever the clocks of producers and workers say. Redis 5+
-- and Valkey replicate a script's effects, not the script, so TIME may come before writes.
-- clock(given): given '' reads TIME; a test passes its own time as Unix seconds (ms). Returns a table:
-- ms (Unix ms, an integer, rounded down), s (the same in Unix seconds with 3 decimals, a string),
-- whole (whole Unix seconds, truncated), ns (Unix ns as a decimal string: beyond a Lua number's 53 bits),
-- us (Unix seconds with 6 decimals, a string: for a caller that times its sleep by it), ms_up (Unix ms rounded
-- up: a delay counted from now must not start in the millisecond that has begun).
local function clock(given)
  local us
  if given and given ~= "" then
    us = math.floor(tonumber(given) * 1000 + 0.5) * 1000
  else
    local t = redis.call("TIME")
    us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  local whole = math.floor(us / 1000000)
  local ms = math.floor(us / 1000)
  local ms_up = math.floor((us + 999) / 1000)
  return {ms = ms, ms_up = ms_up, s = string.format("%d.%03d", whole, ms % 1000), whole = whole,
          ns = string.format("%d%06d000", whole, us % 1000000), us = string.format("%d.%06d", whole, us % 1000000)}
end
