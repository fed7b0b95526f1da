-- session_end: end one session and take it off its user's list.
-- KEYS[1] the session's hash   KEYS[2] its user's set of sessions
-- returns 1 when the session was live, else 0
redis.call("SREM", KEYS[2], KEYS[1])
return redis.call("DEL", KEYS[1])
