-- delete_tasks: delete the given tasks and release the uniqueness locks they hold (asynq's DeleteTask, many ids).
-- KEYS[1] pending list
-- ARGV[1] queue key prefix asynq:{q}:   ARGV[2..] task ids
-- returns one code per id: 1 deleted, 0 no such task, -1 active
local codes = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  local key = ARGV[1] .. "t:" .. id
  local state, group, ukey = unpack(redis.call("HMGET", key, "state", "group", "unique_key"))
  if not state then
    codes[#codes + 1] = 0
  elseif state == "active" then
    codes[#codes + 1] = -1
  else
    if state == "pending" then
      redis.call("LREM", KEYS[1], 1, id)
    elseif state == "aggregating" then
      if group then
        local gkey = ARGV[1] .. "g:" .. group
        redis.call("ZREM", gkey, id)
        if redis.call("EXISTS", gkey) == 0 then redis.call("SREM", ARGV[1] .. "groups", group) end
      end
    else
      redis.call("ZREM", ARGV[1] .. state, id)
    end
    if ukey and redis.call("GET", ukey) == id then redis.call("DEL", ukey) end
    redis.call("DEL", key)
    codes[#codes + 1] = 1
  end
end
return codes
