-- drop_lost_lease: forget an expired lease whose task hash is gone, so it is not listed forever.
-- KEYS[1] lease   KEYS[2] active
-- ARGV[1] task id   ARGV[2] task key prefix   ARGV[3] lease cutoff (Unix s)
-- returns 1 dropped, 0 the hash exists again or the lease was renewed
local score = redis.call("ZSCORE", KEYS[1], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[3]) or redis.call("EXISTS", ARGV[2] .. ARGV[1]) == 1 then
  return 0
end
redis.call("ZREM", KEYS[1], ARGV[1])
redis.call("LREM", KEYS[2], 0, ARGV[1])
return 1
