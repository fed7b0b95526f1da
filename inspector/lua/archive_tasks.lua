-- archive_tasks: move the given tasks to archived (asynq's ArchiveTask, for many ids at once), then trim
-- the archive by age and size, deleting the hashes of the trimmed tasks.
-- KEYS[1] pending list   KEYS[2] archived sorted set   KEYS[3] our exact due times asynqpy:{q}:due
-- ARGV[1] queue key prefix asynq:{q}:   ARGV[2] now (whole Unix s)   ARGV[3] age cutoff (Unix s)
-- ARGV[4] max archive size   ARGV[5..] task ids
-- returns one code per id: 1 archived, 0 no such task, -1 already archived, -2 active
-- #include _detach.lua
-- #include _limits.lua
-- #include _leave_wait.lua
-- #include _archive.lua
local codes = {}
for i = 5, #ARGV do
  local id = ARGV[i]
  local key = ARGV[1] .. "t:" .. id
  local state, group = unpack(redis.call("HMGET", key, "state", "group"))
  if not state then
    codes[#codes + 1] = 0
  elseif state == "archived" then
    codes[#codes + 1] = -1
  elseif state == "active" then
    codes[#codes + 1] = -2
  else
    if state == "pending" then
      leave_wait(ARGV[1], key, id)  -- (when it waits on a limit)
    end
    detach(ARGV[1], KEYS[1], KEYS[3], id, state, group)
    redis.call("ZADD", KEYS[2], ARGV[2], id)
    redis.call("HSET", key, "state", "archived")
    -- limit_wait too: a task archived while it waited on a limit (in the limit's wait list, not in pending) stops
    -- waiting, so that the dequeue drops its stale wait-list entry; else, run again, it would start twice
    redis.call("HDEL", key, "pending_since", "limit_wait")
    codes[#codes + 1] = 1
  end
end
trim_archive(KEYS[2], ARGV[1] .. "t:", ARGV[3], ARGV[4])
return codes
