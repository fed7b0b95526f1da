-- session_create: store a new login session and list it under its user, each with its expiry.
-- KEYS[1] the session's hash (asynqpy:{web}:session:<digest>)   KEYS[2] the user's set of sessions
-- ARGV[1] user   ARGV[2] created (Unix s)   ARGV[3] credential stamp   ARGV[4] the session's TTL (s)
-- ARGV[5] the set's TTL (s)
-- returns 1
redis.call("HSET", KEYS[1], "user", ARGV[1], "created", ARGV[2], "seen", ARGV[2], "stamp", ARGV[3])
redis.call("EXPIRE", KEYS[1], ARGV[4])
redis.call("SADD", KEYS[2], KEYS[1])
redis.call("EXPIRE", KEYS[2], ARGV[5])
return 1
