-- session_touch: note a session's activity and extend its expiry, unless it has ended meanwhile (a logout
-- must not be undone by a request that read the session just before).
-- KEYS[1] the session's hash
-- ARGV[1] now (Unix s)   ARGV[2] the new TTL (s)
-- returns 1 touched, 0 the session is gone
if redis.call("EXISTS", KEYS[1]) == 0 then return 0 end
redis.call("HSET", KEYS[1], "seen", ARGV[1])
redis.call("EXPIRE", KEYS[1], ARGV[2])
return 1
