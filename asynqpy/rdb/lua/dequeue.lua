-- dequeue: move up to N pending tasks to active, each with a lease, in one step (asynq's Dequeue, batched).
-- KEYS[1] pending   KEYS[2] paused   KEYS[3] active   KEYS[4] lease
-- ARGV[1] lease expiry (Unix s)   ARGV[2] task key prefix   ARGV[3] max tasks
-- ARGV[4] "1" to add each task's pending_since (ns string, '' when unset) after its msg (optional); "2" to add
-- that and then the limit the task waited on (its limit_wait field: a limit's name, '' when it did not wait)
-- returns a flat list id1, msg1, id2, msg2, ... (id, msg, since triples with ARGV[4]; empty when paused or
-- nothing is pending). The steps, limits included, are take() in _dequeue.lua.
-- #include _clock.lua
-- #include _limits.lua
-- #include _dequeue.lua
local out = {}
take({pending = KEYS[1], paused = KEYS[2], active = KEYS[3], lease = KEYS[4], prefix = ARGV[2]},
     tonumber(ARGV[3]), ARGV[1], ARGV[4] == "1" or ARGV[4] == "2", ARGV[4] == "2", nil, out)
return out
