-- record_type_stats: add one flush of per-task-type aggregates (many types and minutes) in one call.
-- KEYS[1] asynqpy:{types}:index   then per group: KEYS[2i] its minute hash, KEYS[2i+1] its hour hash
-- ARGV[1] ttl (s) of minute and hour hashes   then per group: task type, minute (Unix min), n (field pairs),
-- n pairs of field name and increment
-- returns the number of groups written
local ttl = ARGV[1]
local a = 2
local g = 0
while a <= #ARGV do
  local ttype, minute, n = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
  local mkey, hkey = KEYS[2 + 2 * g], KEYS[3 + 2 * g]
  a = a + 3
  for _ = 1, n do
    redis.call("HINCRBY", mkey, ARGV[a], ARGV[a + 1])
    redis.call("HINCRBY", hkey, ARGV[a], ARGV[a + 1])
    a = a + 2
  end
  redis.call("EXPIRE", mkey, ttl)
  redis.call("EXPIRE", hkey, ttl)
  local seen = redis.call("ZSCORE", KEYS[1], ttype)
  if not seen or tonumber(seen) < tonumber(minute) then
    redis.call("ZADD", KEYS[1], minute, ttype)
  end
  g = g + 1
end
-- types unseen for longer than the ttl have no hashes left: drop them from the index
local now = redis.call("TIME")
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", "(" .. (math.floor(tonumber(now[1]) / 60) - math.floor(tonumber(ttl) / 60)))
return g
