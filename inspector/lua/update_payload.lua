-- update_payload: replace a scheduled task's message, only if nobody changed it since it was read
-- (asynq's UpdateTaskPayload, with a compare-and-set).
-- KEYS[1] task hash
-- ARGV[1] the message as read   ARGV[2] the new message
-- returns 1 updated, 0 no such task, -1 not scheduled, -2 the message changed meanwhile (read it again)
local msg, state = unpack(redis.call("HMGET", KEYS[1], "msg", "state"))
if not state then return 0 end
if state ~= "scheduled" then return -1 end
if msg ~= ARGV[1] then return -2 end
redis.call("HSET", KEYS[1], "msg", ARGV[2])
return 1
