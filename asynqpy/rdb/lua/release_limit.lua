-- release_limit: a limit was removed; the tasks waiting for it go back to pending, oldest first to run, ahead
-- of the tasks that came after them. See _limits.lua.
-- KEYS[1] the limit partitions with waiting tasks   KEYS[2] pending
-- ARGV[1] limit key prefix asynqpy:{q}:   ARGV[2] limit name   ARGV[3] task key prefix
-- returns how many tasks went back
local moved = 0
local head = ARGV[2] .. "\n"
for _, member in ipairs(redis.call("ZRANGE", KEYS[1], 0, -1)) do
  if string.sub(member, 1, #head) == head then
    local wl = ARGV[1] .. "lwait:" .. member
    while true do
      local id = redis.call("LPOP", wl)
      if not id then
        break
      end
      redis.call("DECR", ARGV[1] .. "lwaitn")
      if redis.call("HDEL", ARGV[3] .. id, "limit_wait") == 1 then
        redis.call("RPUSH", KEYS[2], id)
        moved = moved + 1
      end
    end
    redis.call("ZREM", KEYS[1], member)
  end
end
return moved
