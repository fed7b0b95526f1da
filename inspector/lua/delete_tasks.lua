-- delete_tasks: delete the given tasks and release the uniqueness locks they hold (asynq's DeleteTask, many ids).
-- KEYS[1] pending list   KEYS[2] our exact due times asynqpy:{q}:due
-- ARGV[1] queue key prefix asynq:{q}:   ARGV[2..] task ids
-- returns one code per id: 1 deleted, 0 no such task, -1 active
-- #include _detach.lua
-- #include _limits.lua
-- #include _leave_wait.lua
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
      leave_wait(ARGV[1], key, id)  -- (when it waits on a limit)
    end
    detach(ARGV[1], KEYS[1], KEYS[2], id, state, group)
    if ukey and redis.call("GET", ukey) == id then redis.call("DEL", ukey) end
    redis.call("DEL", key)
    codes[#codes + 1] = 1
  end
end
return codes
