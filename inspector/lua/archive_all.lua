-- archive_all: move one bounded chunk of pending (oldest first), scheduled, retry or a group to archived,
-- then trim the archive by age and size (deleting trimmed hashes). The caller repeats it until nothing is taken.
-- KEYS[1] source list or sorted set   KEYS[2] archived sorted set   KEYS[3] groups set
-- ARGV[1] task key prefix   ARGV[2] chunk size   ARGV[3] "list" or "zset"   ARGV[4] now (Unix s)
-- ARGV[5] age cutoff (Unix s)   ARGV[6] max archive size   ARGV[7] group name when the source is a group, else ''
-- returns {moved, taken}
-- #include _chunk.lua
local n = tonumber(ARGV[2])
local ids = take_chunk(KEYS[1], n, ARGV[3])
local moved = 0
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  if redis.call("EXISTS", key) == 1 then
    redis.call("ZADD", KEYS[2], ARGV[4], id)
    redis.call("HSET", key, "state", "archived")
    redis.call("HDEL", key, "pending_since")
    moved = moved + 1
  end
end
for _, id in ipairs(redis.call("ZRANGEBYSCORE", KEYS[2], "-inf", ARGV[5])) do redis.call("DEL", ARGV[1] .. id) end
redis.call("ZREMRANGEBYSCORE", KEYS[2], "-inf", ARGV[5])
local cap = -tonumber(ARGV[6])
for _, id in ipairs(redis.call("ZRANGE", KEYS[2], 0, cap)) do redis.call("DEL", ARGV[1] .. id) end
redis.call("ZREMRANGEBYRANK", KEYS[2], 0, cap)
if ARGV[7] ~= "" and redis.call("EXISTS", KEYS[1]) == 0 then redis.call("SREM", KEYS[3], ARGV[7]) end
return {moved, #ids}
