-- requeue_handoff: a worker with no free slot gives the first task of its hand-off list back to the front of
-- its queue, as requeue.lua does. The list element goes last, so a call refused midway (ACL, BUSY) loses nothing.
-- KEYS[1] hand-off list   KEYS[2] active   KEYS[3] lease   KEYS[4] pending
-- ARGV[1] task key prefix   ARGV[2] now (Unix ns): its pending_since, as it is pending again from now on
-- returns the task id given back ('' when it was no longer leased to us), false when the list is empty
local item = redis.call("LINDEX", KEYS[1], 0)
if not item then
  return false
end
local colon = string.find(item, ":", 1, true)
local id = string.sub(item, colon + 1, colon + tonumber(string.sub(item, 1, colon - 1)))
local held = redis.call("ZREM", KEYS[3], id) == 1
if held then
  redis.call("LREM", KEYS[2], 0, id)
  redis.call("RPUSH", KEYS[4], id)
  redis.call("HSET", ARGV[1] .. id, "state", "pending", "pending_since", ARGV[2])
end
redis.call("LPOP", KEYS[1])
if held then
  return id
end
return ""
