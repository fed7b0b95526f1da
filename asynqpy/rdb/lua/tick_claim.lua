-- tick_claim: a scheduler replica claims one tick of an entry and enqueues its task, in one atomic step.
-- The body of an enqueue-family script (enqueue, enqueue_unique, schedule, schedule_unique, add_to_group)
-- is pasted at "-- #body" and runs with its own KEYS and ARGV (everything after the claim's).
-- KEYS[1] the entry's latest claimed tick (string, Unix s)   KEYS[2] this tick's claim
-- KEYS[3] the entry's pause flag (asynqpy:{q}:cronpaused:<id>; present = paused by an operator)
-- KEYS[4..] the enqueue script's KEYS
-- ARGV[1] tick (Unix s, whole)   ARGV[2] claim ttl (s)   ARGV[3] latest-tick ttl (s)
-- ARGV[4] "1" = catch-up: claim only if the entry ran before and no later tick ran
-- ARGV[5] tolerance (s): a tick this much older than the latest claimed one counts as taken (its claim may
-- have expired)   ARGV[6] claim value (the scheduler id)   ARGV[7] now: '' = the Redis server's TIME (a test's
-- fake clock gives Unix s)   ARGV[8..] the enqueue script's ARGV
-- returns -5 paused (the flag is set: nothing is written, the tick is skipped), -2 taken (claimed already), -3 catch-up with no earlier tick on record, -4 early (the tick is still
-- ahead by Redis's clock, whatever the scheduler's own clock says: nothing is written),
-- else the enqueue script's reply (the tick stays claimed whatever that reply is)
-- #include _clock.lua
local tick = tonumber(ARGV[1])
if tick * 1000 > clock(ARGV[7]).ms then
  return -4
end
if redis.call("EXISTS", KEYS[3]) == 1 then
  return -5
end
local latest = redis.call("GET", KEYS[1])
latest = latest and tonumber(latest)
if latest and latest >= tick + tonumber(ARGV[5]) then
  return -2
end
if ARGV[4] == "1" then
  if not latest then
    return -3
  end
  if latest >= tick then
    return -2
  end
end
if not redis.call("SET", KEYS[2], ARGV[6], "NX", "EX", ARGV[2]) then
  return -2
end
if not latest or latest < tick then
  redis.call("SET", KEYS[1], ARGV[1], "EX", ARGV[3])
end
local function enqueue(KEYS, ARGV)
-- #body
end
return enqueue({unpack(KEYS, 4)}, {unpack(ARGV, 8)})
