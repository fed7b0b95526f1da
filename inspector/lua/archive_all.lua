-- archive_all: move one bounded chunk of pending (oldest first), scheduled, retry or a group to archived,
-- then trim the archive by age and size (deleting trimmed hashes). The caller repeats it until nothing is taken.
-- KEYS[1] source list or sorted set   KEYS[2] archived sorted set   KEYS[3] groups set
-- KEYS[4] our exact due times asynqpy:{q}:due
-- ARGV[1] task key prefix   ARGV[2] chunk size   ARGV[3] "list" or "zset"   ARGV[4] now (whole Unix s)
-- ARGV[5] age cutoff (Unix s)   ARGV[6] max archive size   ARGV[7] group name when the source is a group, else ''
-- a job's chunk also has KEYS[5] its receipt asynqpy:{q}:jobstep:<job id>, ARGV[8] its sequence number and
-- ARGV[9] the receipt's TTL (s): sent again with the same number, it answers the first reply and moves nothing
-- returns {moved, taken}
-- #include _chunk.lua
-- #include _archive.lua
-- #include _receipt.lua
local replayed = replay_receipt(KEYS[5], ARGV[8])
if replayed then return replayed end
local ids = take_chunk(KEYS[1], tonumber(ARGV[2]), ARGV[3], KEYS[4])
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
trim_archive(KEYS[2], ARGV[1], ARGV[5], ARGV[6])
if ARGV[7] ~= "" and redis.call("EXISTS", KEYS[1]) == 0 then redis.call("SREM", KEYS[3], ARGV[7]) end
return keep_receipt(KEYS[5], ARGV[8], ARGV[9], {moved, #ids})
