-- record_type_stats: add one flush of per-(queue, task type) aggregates (many pairs and minutes) in one call.
-- KEYS[1] asynqpy:{types}:qindex   KEYS[2] asynqpy:{types}:index (earlier workers' index: only trimmed here)
-- then per group: KEYS[1+2i] its minute hash, KEYS[2+2i] its hour hash (i from 1)
-- ARGV[1] ttl (s) of minute and hour hashes   then per group: index member (JSON [queue, type]), minute
-- (Unix min), n (field pairs), n pairs of field name and increment
-- returns the number of groups written
local ttl = ARGV[1]
local a = 2
local g = 0
while a <= #ARGV do
  local member, minute, n = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
  local mkey, hkey = KEYS[3 + 2 * g], KEYS[4 + 2 * g]
  a = a + 3
  for _ = 1, n do
    redis.call("HINCRBY", mkey, ARGV[a], ARGV[a + 1])
    redis.call("HINCRBY", hkey, ARGV[a], ARGV[a + 1])
    a = a + 2
  end
  redis.call("EXPIRE", mkey, ttl)
  redis.call("EXPIRE", hkey, ttl)
  local seen = redis.call("ZSCORE", KEYS[1], member)
  if not seen or tonumber(seen) < tonumber(minute) then
    redis.call("ZADD", KEYS[1], minute, member)
  end
  g = g + 1
end
-- pairs unseen for longer than the ttl have no hashes left: drop them from the indexes
local now = redis.call("TIME")
local gone = "(" .. (math.floor(tonumber(now[1]) / 60) - math.floor(tonumber(ttl) / 60))
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", gone)
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", gone)
return g
