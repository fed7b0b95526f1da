-- Count one failed login against each throttle key, each in a window that starts with its first failure.
-- KEYS: the counters (asynqpy:web:throttle:user:<name>, asynqpy:web:throttle:addr:<address>)
-- ARGV[1] the window in seconds
-- Returns {count, ttl seconds} per key.
local out = {}
for i, key in ipairs(KEYS) do
  local n = redis.call('INCR', key)
  if n == 1 then
    redis.call('EXPIRE', key, ARGV[1])
  end
  out[i] = {n, redis.call('TTL', key)}
end
return out
