-- unregister_waiter: a server of ours that filled up withdraws its offer to take q's next task.
-- KEYS[1] asynqpy:{q}:waiters
-- ARGV[1] server id
-- returns 1 when it was registered
return redis.call("ZREM", KEYS[1], ARGV[1])
