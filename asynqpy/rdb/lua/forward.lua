-- forward: due scheduled and retry tasks go to pending, or to their group (asynq's forwarder, both sets at once);
-- each one that reaches pending goes straight to an idle worker of ours when one waits (see _handoff.lua),
-- and if any is left in pending, idle workers are woken. "Now" is the Redis server's clock (see _clock.lua),
-- so a worker whose own clock is off starts no task early or late.
-- A task is due when its asynq score (whole seconds, or a fractional one written by an older asynqpy) is <= now,
-- or, for the tasks of the current second, when its exact due time in KEYS[8] has passed (see _due.lua).
-- KEYS[1] scheduled zset   KEYS[2] retry zset   KEYS[3] pending list
-- KEYS[4] waiters zset   KEYS[5] paused   KEYS[6] active   KEYS[7] lease   KEYS[8] our exact due times
-- KEYS[9] the limit partitions with waiting tasks (optional; see _limits.lua): idle workers are woken when one
-- is due to be looked at again, and its time counts as a next due time
-- ARGV[1] now: '' = Redis's TIME (a test gives Unix s, ms)   ARGV[2] task key prefix   ARGV[3] group key prefix
-- ARGV[4] batch size   ARGV[5] hand-off lease (s)   ARGV[6] hand-off key prefix   ARGV[7] wake channel ('' = none)
-- ARGV[8] queue
-- returns {moved, the next due time as a string or '', now (Unix s, us: the judging was by its ms)}: the caller
-- sleeps until that time
-- #include _clock.lua
-- #include _limits.lua
-- #include _handoff.lua
-- #include _due.lua
local now = clock(ARGV[1])
local lease_expiry = math.ceil(now.ms / 1000 + tonumber(ARGV[5]))
local moved = 0
local waiting = 0
local limit = tonumber(ARGV[4])
local function move(src, id)
  local key = ARGV[2] .. id
  local group = redis.call("HGET", key, "group")
  if group and group ~= "" then
    redis.call("ZADD", ARGV[3] .. group, now.whole, id)
    redis.call("HSET", key, "state", "aggregating")
  else
    redis.call("LPUSH", KEYS[3], id)
    redis.call("HSET", key, "state", "pending", "pending_since", now.ns)
    if not handoff(KEYS[4], KEYS[5], KEYS[3], KEYS[6], KEYS[7], now.s, lease_expiry, ARGV[2], ARGV[6]) then
      waiting = waiting + 1
    end
  end
  redis.call("ZREM", src, id)
  redis.call("ZREM", KEYS[8], id)
  moved = moved + 1
end
-- A set's first member is read first (its score is also the next due time): the range is read only when that
-- one is due, so an idle pass is one ZRANGE per set
local function head(key)
  return redis.call("ZRANGE", key, 0, 0, "WITHSCORES")
end
local function due_now(first)
  return first[2] ~= nil and tonumber(first[2]) <= tonumber(now.s)
end
local firsts = {}
for k = 1, 3 do
  firsts[k] = head(KEYS[k == 3 and 8 or k])
end
for k = 1, 2 do
  if due_now(firsts[k]) and moved < limit then
    for _, id in ipairs(redis.call("ZRANGEBYSCORE", KEYS[k], "-inf", now.s, "LIMIT", 0, limit - moved)) do
      move(KEYS[k], id)
    end
    firsts[k] = nil
  end
end
if moved < limit and due_now(firsts[3]) then
  firsts[3] = nil
  local exact = redis.call("ZRANGEBYSCORE", KEYS[8], "-inf", now.s, "WITHSCORES", "LIMIT", 0, limit - moved)
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
local lwait = KEYS[9] and redis.call("ZRANGE", KEYS[9], 0, 0, "WITHSCORES") or {}
if lwait[2] and tonumber(lwait[2]) <= tonumber(now.s) then
  waiting = waiting + 1
end
if waiting > 0 and ARGV[7] ~= "" then
  redis.call("PUBLISH", ARGV[7], ARGV[8])
end
local nextdue = ""
for k = 1, 3 do
  -- read again only when this pass changed the sets (a move takes a task out of a set and of KEYS[8])
  local first = moved == 0 and firsts[k] or head(KEYS[k == 3 and 8 or k])
  if first[2] and (nextdue == "" or tonumber(first[2]) < tonumber(nextdue)) then
    nextdue = first[2]
  end
end
if lwait[2] then
  -- one already due waits for a free worker: look again in 0.2 s, not at once (no spinning forwarder)
  local again = math.max(tonumber(lwait[2]), now.ms / 1000 + 0.2)
  if nextdue == "" or again < tonumber(nextdue) then
    nextdue = string.format("%.3f", again)
  end
end
return {moved, nextdue, now.us}
