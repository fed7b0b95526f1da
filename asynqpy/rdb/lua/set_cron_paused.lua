-- set_cron_paused: pause or resume a scheduler entry (the flag every replica's tick_claim reads).
-- KEYS[1] asynqpy:{<queue>}:cronpaused:<entry id>
-- ARGV[1] "1" pause, "0" resume   ARGV[2] the flag's value when pausing (who and when, JSON)
-- returns 1 when the state changed, 0 when it was so already
if ARGV[1] == "1" then
  if redis.call("SET", KEYS[1], ARGV[2], "NX") then
    return 1
  end
  return 0
end
return redis.call("DEL", KEYS[1])
