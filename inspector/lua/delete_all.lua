-- delete_all: delete one bounded chunk of a state's tasks (pending oldest first, or a sorted set), releasing
-- the uniqueness locks they hold. The caller repeats it until nothing is taken.
-- KEYS[1] source list or sorted set   KEYS[2] groups set   KEYS[3] our exact due times asynqpy:{q}:due
-- ARGV[1] task key prefix   ARGV[2] chunk size   ARGV[3] "list" or "zset"
-- ARGV[4] group name when the source is a group, else ''
-- a job's chunk also has KEYS[4] its receipt asynqpy:{q}:jobstep:<job id>, ARGV[5] its sequence number and
-- ARGV[6] the receipt's TTL (s): sent again with the same number, it answers the first reply and deletes nothing
-- returns {deleted, taken}
-- #include _chunk.lua
-- #include _receipt.lua
local replayed = replay_receipt(KEYS[4], ARGV[5])
if replayed then return replayed end
local n = tonumber(ARGV[2])
local ids = take_chunk(KEYS[1], n, ARGV[3], KEYS[3])
local deleted = 0
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  local ukey = redis.call("HGET", key, "unique_key")
  if ukey and redis.call("GET", ukey) == id then redis.call("DEL", ukey) end
  deleted = deleted + redis.call("DEL", key)
end
if ARGV[4] ~= "" and redis.call("EXISTS", KEYS[1]) == 0 then redis.call("SREM", KEYS[2], ARGV[4]) end
return keep_receipt(KEYS[4], ARGV[5], ARGV[6], {deleted, #ids})
