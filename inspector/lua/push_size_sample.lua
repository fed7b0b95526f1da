-- push_size_sample: push one queue-size sample and its sums over queues, each list capped to the newest kept.
-- KEYS[1] the per-queue samples (asynqpy:{sizes})   KEYS[2] the totals (asynqpy:{sizes}:total)
-- ARGV[1] the per-queue sample (JSON)   ARGV[2] the totals sample (JSON)   ARGV[3] samples kept
-- returns 1
redis.call("LPUSH", KEYS[1], ARGV[1])
redis.call("LTRIM", KEYS[1], 0, tonumber(ARGV[3]) - 1)
redis.call("LPUSH", KEYS[2], ARGV[2])
redis.call("LTRIM", KEYS[2], 0, tonumber(ARGV[3]) - 1)
return 1
