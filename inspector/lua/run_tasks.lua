-- run_tasks: move the given tasks to pending so they run now (asynq's RunTask, for many ids at once).
-- KEYS[1] pending list   KEYS[2] our exact due times asynqpy:{q}:due
-- ARGV[1] queue key prefix asynq:{q}:   ARGV[2] now (Unix ns, becomes pending_since)   ARGV[3..] task ids
-- returns one code per id: 1 moved, 0 no such task, -1 active, -2 already pending
-- #include _detach.lua
local codes = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  local key = ARGV[1] .. "t:" .. id
  local state, group = unpack(redis.call("HMGET", key, "state", "group"))
  if not state then
    codes[#codes + 1] = 0
  elseif state == "active" then
    codes[#codes + 1] = -1
  elseif state == "pending" then
    codes[#codes + 1] = -2
  else
    detach(ARGV[1], KEYS[1], KEYS[2], id, state, group)
    redis.call("LPUSH", KEYS[1], id)
    redis.call("HSET", key, "state", "pending", "pending_since", ARGV[2])
    codes[#codes + 1] = 1
  end
end
return codes
