-- session_end: end one session, take it off its user's list, and bump the sessions epoch (every app process
-- then reads the sessions it keeps in memory afresh, within a second: inspector.webstate).
-- KEYS[1] the session's hash   KEYS[2] its user's set of sessions   KEYS[3] the sessions epoch
-- returns 1 when the session was live, else 0
redis.call("SREM", KEYS[2], KEYS[1])
local live = redis.call("DEL", KEYS[1])
redis.call("INCR", KEYS[3])
return live
