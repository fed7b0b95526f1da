-- Reserve one login attempt before the password is checked, so parallel guesses cannot slip past a limit:
-- the attempt counts as a failure at once (login_refund gives it back after a success). A refused attempt
-- counts nothing.
-- KEYS[1..n]: counters, each limited within a window that starts with its first failure (the account and address
--   pair, or the trusted device; the address); KEYS[n+1] (optional): the account's slow-down hash {fails, next}
-- ARGV[1] window seconds, ARGV[2] now (ms), ARGV[3] account failures before each attempt waits,
-- ARGV[4] first wait (ms, doubling per further failure), ARGV[5] longest wait (ms), ARGV[6] n, ARGV[6+i] limit i
-- Returns {0, 0} when counted, else {i, retry-after seconds}: i the refusing key's index (n+1: the account).
local window, now, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[6])
for i = 1, n do
  if tonumber(redis.call('GET', KEYS[i]) or '0') >= tonumber(ARGV[6 + i]) then
    return {i, math.max(redis.call('TTL', KEYS[i]), 1)}
  end
end
local account = KEYS[n + 1]
if account then
  local nxt = tonumber(redis.call('HGET', account, 'next') or '0')
  if now < nxt then
    return {n + 1, math.ceil((nxt - now) / 1000)}
  end
end
for i = 1, n do
  if redis.call('INCR', KEYS[i]) == 1 then redis.call('EXPIRE', KEYS[i], window) end
end
if account then
  local fails = redis.call('HINCRBY', account, 'fails', 1)
  if fails == 1 then redis.call('EXPIRE', account, window) end
  local over = fails - tonumber(ARGV[3])
  if over > 0 then
    local wait = math.min(tonumber(ARGV[4]) * 2 ^ math.min(over - 1, 40), tonumber(ARGV[5]))
    redis.call('HSET', account, 'next', math.floor(now + wait))
  end
end
return {0, 0}
