-- session_create: store a new login session and list it under its user, each with its expiry.
-- KEYS[1] the session's hash (asynqpy:{web}:session:<digest>)   KEYS[2] the user's set of sessions
-- KEYS[3] the sessions epoch (made when missing, at a random start: a flushed server's new epoch differs from
--         the one app processes remember, so they drop the sessions they keep in memory)
-- ARGV[1] user   ARGV[2] created (Unix s)   ARGV[3] credential stamp   ARGV[4] role (identity-provider logins)
-- ARGV[5] via ("" or "oidc")   ARGV[6] the session's TTL (s)   ARGV[7] the set's TTL (s)   ARGV[8] a random epoch
-- returns 1
redis.call("HSET", KEYS[1], "user", ARGV[1], "created", ARGV[2], "seen", ARGV[2], "stamp", ARGV[3],
           "role", ARGV[4], "via", ARGV[5])
redis.call("EXPIRE", KEYS[1], ARGV[6])
redis.call("SADD", KEYS[2], KEYS[1])
redis.call("EXPIRE", KEYS[2], ARGV[7])
redis.call("SET", KEYS[3], ARGV[8], "NX")
return 1
