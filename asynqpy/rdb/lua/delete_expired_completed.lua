-- delete_expired_completed: the janitor deletes completed tasks whose retention ran out.
-- KEYS[1] completed zset
-- ARGV[1] now (Unix s)   ARGV[2] task key prefix   ARGV[3] batch size
-- returns how many were deleted
local ids = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1], "LIMIT", 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  redis.call("DEL", ARGV[2] .. id)
  redis.call("ZREM", KEYS[1], id)
end
return #ids
