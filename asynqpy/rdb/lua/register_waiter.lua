-- register_waiter: an idle server of ours offers to take q's next task at once (enqueue scripts hand it over).
-- It refuses while its hand-off list of q holds a task, so that a registration stands only while that list is
-- empty (a hand-off removes the registration it uses as it fills the list): a fetch that finds it standing need
-- not ask the list (see take_handed in _dequeue.lua). The server's lane pops what the list holds instead.
-- A renewal (the registration still stands, so the list is empty) is one ZADD; the list is asked only when the
-- registration is new (consumed by a hand-off or withdrawn since).
-- KEYS[1] asynqpy:{q}:waiters   KEYS[2] the server's hand-off list of q, asynqpy:{q}:handoff:<server id>
-- ARGV[1] server id   ARGV[2] score: until when the offer stands (Unix s, ms)   ARGV[3] prune: drop offers that
-- lapsed before this (Unix s), '' = no pruning
-- returns 1 when registered, 0 when refused (the list holds a task)
local ok = 1
if redis.call("ZADD", KEYS[1], "XX", "CH", ARGV[2], ARGV[1]) == 0 then
  if redis.call("EXISTS", KEYS[2]) == 1 then
    ok = 0
  else
    redis.call("ZADD", KEYS[1], ARGV[2], ARGV[1])
  end
end
if ARGV[3] ~= "" then
  redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", ARGV[3])
end
return ok
