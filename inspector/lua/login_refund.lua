-- After a successful login: give back the attempt login_attempt counted.
-- KEYS[1]: the pair or device counter (deleted: this browser, from here, knows the password);
-- KEYS[2..n]: other counters (one failure taken back); KEYS[n+1] (optional): the account's slow-down hash
-- ARGV[1] n
-- Returns 1.
local n = tonumber(ARGV[1])
redis.call('DEL', KEYS[1])
for i = 2, n do
  if redis.call('DECR', KEYS[i]) <= 0 then redis.call('DEL', KEYS[i]) end
end
local account = KEYS[n + 1]
if account and redis.call('EXISTS', account) == 1 then
  if redis.call('HINCRBY', account, 'fails', -1) <= 0 then redis.call('DEL', account) end
end
return 1
