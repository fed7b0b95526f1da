-- release_lock: delete a lock only while it still holds our token, so a slow holder never frees a successor's.
-- KEYS[1] the lock
-- ARGV[1] our token
-- returns 1 released, 0 not ours (expired, or taken by another since)
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0
