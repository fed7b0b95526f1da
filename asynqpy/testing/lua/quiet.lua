-- quiet: how far a test's drain is from done on one queue, by the Redis server's clock.
-- KEYS[1] pending list   KEYS[2] active list   KEYS[3] scheduled zset   KEYS[4] retry zset
-- ARGV: none
-- returns {pending + active, scheduled and retry tasks due within a second, the earliest later due score or '',
--          Redis's now in whole seconds}
-- (asynq's scores are whole seconds rounded up, so "within a second" covers an exact due time in this second)
local t = redis.call("TIME")
local soon = tonumber(t[1]) + 1
local busy = redis.call("LLEN", KEYS[1]) + redis.call("LLEN", KEYS[2])
local due = redis.call("ZCOUNT", KEYS[3], "-inf", soon) + redis.call("ZCOUNT", KEYS[4], "-inf", soon)
local later = ""
for i = 3, 4 do
  local first = redis.call("ZRANGEBYSCORE", KEYS[i], "(" .. soon, "+inf", "WITHSCORES", "LIMIT", 0, 1)
  if #first > 0 and (later == "" or tonumber(first[2]) < tonumber(later)) then
    later = first[2]
  end
end
return {busy, due, later, tostring(t[1])}
