-- list_lease_expired: the messages of active tasks whose lease ran out before a cutoff (read only).
-- KEYS[1] lease zset
-- ARGV[1] cutoff (Unix s)   ARGV[2] task key prefix   ARGV[3] max count
-- returns a flat list id1, msg1, ... ; a msg is '' when the task hash is gone
local out = {}
for _, id in ipairs(redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1], "LIMIT", 0, ARGV[3])) do
  out[#out + 1] = id
  out[#out + 1] = redis.call("HGET", ARGV[2] .. id, "msg") or ""
end
return out
