-- tick_claim: a scheduler replica claims one tick of an entry and enqueues its task, in one atomic step.
-- The body of an enqueue-family script (enqueue, enqueue_unique, schedule, schedule_unique, add_to_group)
-- is pasted at "-- #body" and runs with its own KEYS and ARGV (everything after the claim's).
-- KEYS[1] the entry's tick mark (string: the latest claimed tick, Unix s)   KEYS[2..] the enqueue script's KEYS
-- ARGV[1] tick (Unix s, whole)   ARGV[2] mark ttl (s)   ARGV[3] "1" = catch-up: claim only if the entry has
-- run before   ARGV[4..] the enqueue script's ARGV
-- returns -2 already claimed (this tick or a later one), -3 catch-up with no earlier tick on record,
-- else the enqueue script's reply (the tick stays claimed whatever that reply is)
local mark = redis.call("GET", KEYS[1])
if mark then
  if tonumber(mark) >= tonumber(ARGV[1]) then
    return -2
  end
elseif ARGV[3] == "1" then
  return -3
end
redis.call("SET", KEYS[1], ARGV[1], "EX", ARGV[2])
local function enqueue(KEYS, ARGV)
-- #body
end
return enqueue({unpack(KEYS, 2)}, {unpack(ARGV, 4)})
