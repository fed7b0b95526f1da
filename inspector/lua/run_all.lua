-- run_all: move one bounded chunk of a sorted set (scheduled, retry, archived, completed or a group) to pending.
-- The caller repeats it until nothing is taken, so no single call blocks Redis for long.
-- KEYS[1] source sorted set   KEYS[2] pending list   KEYS[3] groups set   KEYS[4] our exact due times
-- ARGV[1] task key prefix   ARGV[2] chunk size   ARGV[3] now (Unix ns, becomes pending_since)
-- ARGV[4] group name when the source is a group, else ''
-- a job's chunk also has KEYS[5] its receipt asynqpy:{q}:jobstep:<job id>, ARGV[5] its sequence number and
-- ARGV[6] the receipt's TTL (s): sent again with the same number, it answers the first reply and moves nothing
-- returns {moved, taken}: ids whose task hash is gone are taken out of the source but not moved
-- #include _receipt.lua
local replayed = replay_receipt(KEYS[5], ARGV[5])
if replayed then return replayed end
local ids = redis.call("ZRANGE", KEYS[1], 0, tonumber(ARGV[2]) - 1)
local moved = 0
for _, id in ipairs(ids) do
  local key = ARGV[1] .. id
  if redis.call("EXISTS", key) == 1 then
    redis.call("LPUSH", KEYS[2], id)
    redis.call("HSET", key, "state", "pending", "pending_since", ARGV[3])
    moved = moved + 1
  end
end
if #ids > 0 then
  redis.call("ZREMRANGEBYRANK", KEYS[1], 0, #ids - 1)
  for _, id in ipairs(ids) do redis.call("ZREM", KEYS[4], id) end
end
if ARGV[4] ~= "" and redis.call("EXISTS", KEYS[1]) == 0 then redis.call("SREM", KEYS[3], ARGV[4]) end
return keep_receipt(KEYS[5], ARGV[5], ARGV[6], {moved, #ids})
