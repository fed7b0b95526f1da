-- read_aggregation_set: the messages of an aggregation set's tasks and the set's deadline (read only).
-- KEYS[1] set key   KEYS[2] aggregation_sets
-- ARGV[1] task key prefix
-- returns {deadline score or '', msg1, msg2, ...}; missing hashes are skipped
local out = {redis.call("ZSCORE", KEYS[2], KEYS[1]) or ""}
for _, id in ipairs(redis.call("ZRANGE", KEYS[1], 0, -1)) do
  local msg = redis.call("HGET", ARGV[1] .. id, "msg")
  if msg then
    out[#out + 1] = msg
  end
end
return out
