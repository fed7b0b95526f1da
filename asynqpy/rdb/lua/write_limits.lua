-- write_limits: change a queue's copy of the limits and, when its set of names changes, drop its type index
-- (asynqpy:{q}:ltypes, see _limits.lua) in the same step, so no dequeue or hand-off sees new limits through the
-- old index: a limit added applies to the types already seen at once, a removed one frees them at once.
-- (A changed concurrency or rate keeps its name and pattern: the index stays right, only the limit is read anew.)
-- KEYS[1] asynqpy:{q}:limits   KEYS[2] asynqpy:{q}:ltypes
-- ARGV[1] "1" to replace every limit of the queue with the given ones, "" to change only the given ones
-- ARGV[2..] name, encoded limit, ...; an empty encoding removes that limit
-- returns how many of the given names the queue had before
local had, changed = 0, ARGV[1] == "1"
if changed then
  redis.call("DEL", KEYS[1])
end
for i = 2, #ARGV, 2 do
  if ARGV[i + 1] == "" then
    if redis.call("HDEL", KEYS[1], ARGV[i]) == 1 then
      had, changed = had + 1, true
    end
  elseif redis.call("HSET", KEYS[1], ARGV[i], ARGV[i + 1]) == 1 then
    changed = true
  else
    had = had + 1
  end
end
if changed then
  redis.call("DEL", KEYS[2])
end
return had
