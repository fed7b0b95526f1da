-- _leave_wait.lua: a fragment (pasted at "-- #include _leave_wait.lua", after _limits.lua): a pending task that
-- waits on a limit (its limit_wait field names it; see asynqpy/rdb/lua/_limits.lua) leaves that limit's wait
-- list, and the count of waiting tasks that backpressure adds to the queue's size (lwaitn), in the same step
-- as the Inspector deletes or archives it: else the deleted task counted toward the size, and the queue could
-- refuse producers for it, until a fetch found it at the head of its wait list. Its wait list is found from
-- its message's partition, else (the limit changed since) among the limit's partitions.
-- prefix: asynq:{q}:   key, id: the task's key and id
local function leave_wait(prefix, key, id)
  local name, msg = unpack(redis.call("HMGET", key, "limit_wait", "msg"))
  if not name then
    return
  end
  redis.call("HDEL", key, "limit_wait")
  local lp = "asynqpy:" .. string.sub(prefix, 7)
  local head = name .. "\n"
  local function leave(member)
    local wl = lp .. "lwait:" .. member
    if redis.call("LREM", wl, 1, id) == 0 then
      return false
    end
    redis.call("DECR", lp .. "lwaitn")
    if redis.call("LLEN", wl) == 0 then
      redis.call("ZREM", lp .. "lwaiting", member)
    end
    return true
  end
  local list = msg and load_limits(lp)
  if list then
    for _, m in ipairs(limits_lib().limits_of(list, msg)) do
      if m.l.name == name and leave(head .. m.part) then
        return
      end
    end
  end
  for _, member in ipairs(redis.call("ZRANGE", lp .. "lwaiting", 0, -1)) do
    if string.sub(member, 1, #head) == head and leave(member) then
      return
    end
  end
end
