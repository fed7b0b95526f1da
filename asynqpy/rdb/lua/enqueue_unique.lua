-- enqueue_unique: like enqueue, holding the uniqueness lock first (asynq's EnqueueUnique).
-- KEYS[1] unique lock   KEYS[2] task hash   KEYS[3] pending list
-- KEYS[4] waiters zset   KEYS[5] paused   KEYS[6] active   KEYS[7] lease
-- ARGV[1] task id   ARGV[2] lock ttl (whole seconds)   ARGV[3] msg bytes   ARGV[4] wake channel ('' = none)
-- ARGV[5] queue   ARGV[6] hand-off lease (s)   ARGV[7] task key prefix   ARGV[8] hand-off key prefix
-- returns "full:..." refused by the queue's backpressure limit (see _room.lua), 1 enqueued, 0 id conflict (the lock stays set, as in asynq), -1 duplicate (lock held)
-- #include _clock.lua
-- #include _room.lua
-- #include _limits.lua
-- #include _handoff.lua
-- #include _new_task.lua
local now = clock("")  -- one reading for the limit check and the task
local plain, full, taken = new_task_checks(KEYS[3], KEYS[5], KEYS[2], now.ms, true)
if full then
  return full
end
local ok = redis.call("SET", KEYS[1], ARGV[1], "NX", "EX", ARGV[2])
if not ok then
  return -1
end
if taken then
  return 0
end
enqueue_new(KEYS[2], ARGV[1], ARGV[3], {"unique_key", KEYS[1]}, now.ns, KEYS[4], KEYS[5], KEYS[3], KEYS[6], KEYS[7],
            now.s, math.ceil(now.ms / 1000 + tonumber(ARGV[6])), ARGV[7], ARGV[8], ARGV[4], ARGV[5], plain)
return 1
