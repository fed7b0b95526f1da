-- advance: a test's clock jump for one queue: every scheduled and retry task becomes due `seconds` earlier.
-- Due times are judged by the Redis server's clock (TIME) inside the scripts, which a test cannot move; so
-- the due times move instead, which a forwarder sees exactly as time passing. Never started early: the asynq
-- score stays the whole second at or after the exact due time (see _due.lua).
-- KEYS[1] scheduled zset   KEYS[2] retry zset   KEYS[3] our exact due times
-- ARGV[1] seconds (> 0)
-- returns the number of tasks moved
-- #include _due.lua
local s = tonumber(ARGV[1])
local moved = 0
for i = 1, 2 do
  local rows = redis.call("ZRANGE", KEYS[i], 0, -1, "WITHSCORES")
  for j = 1, #rows, 2 do
    local id, score = rows[j], tonumber(rows[j + 1])
    local exact = redis.call("ZSCORE", KEYS[3], id)
    if exact and exact_fits(score, exact) then
      local e = tonumber(exact) - s
      redis.call("ZADD", KEYS[3], string.format("%.3f", e), id)
      redis.call("ZADD", KEYS[i], math.ceil(e), id)
    else
      redis.call("ZADD", KEYS[i], math.ceil(score - s), id)
    end
    moved = moved + 1
  end
end
return moved
