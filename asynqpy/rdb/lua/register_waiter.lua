-- register_waiter: an idle server of ours offers to take q's next task at once (enqueue scripts hand it over).
-- KEYS[1] asynqpy:{q}:waiters
-- ARGV[1] server id   ARGV[2] score: until when the offer stands (Unix s, ms)   ARGV[3] prune: drop offers that
-- lapsed before this (Unix s), '' = no pruning
-- returns 1
redis.call("ZADD", KEYS[1], ARGV[2], ARGV[1])
if ARGV[3] ~= "" then
  redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[3])
end
return 1
