-- dequeue: move up to N pending tasks to active, each with a lease, in one step (asynq's Dequeue, batched).
-- KEYS[1] pending   KEYS[2] paused   KEYS[3] active   KEYS[4] lease
-- ARGV[1] lease expiry (Unix s)   ARGV[2] task key prefix   ARGV[3] max tasks
-- ARGV[4] "1" to add each task's pending_since (ns string, '' when unset) after its msg (optional)
-- returns a flat list id1, msg1, id2, msg2, ... (id, msg, since triples with ARGV[4]; empty when paused or
-- nothing is pending).
-- An id whose hash is gone is dropped from active rather than handed out.
if redis.call("EXISTS", KEYS[2]) == 1 then
  return {}
end
local out = {}
local with_since = ARGV[4] == "1"
for _ = 1, tonumber(ARGV[3]) do
  local id = redis.call("RPOPLPUSH", KEYS[1], KEYS[3])
  if not id then
    break
  end
  local key = ARGV[2] .. id
  local msg = redis.call("HGET", key, "msg")
  if msg then
    local since = with_since and (redis.call("HGET", key, "pending_since") or "")
    redis.call("HSET", key, "state", "active")
    redis.call("HDEL", key, "pending_since")
    redis.call("ZADD", KEYS[4], ARGV[1], id)
    out[#out + 1] = id
    out[#out + 1] = msg
    if with_since then out[#out + 1] = since end
  else
    redis.call("LREM", KEYS[3], 1, id)
  end
end
return out
