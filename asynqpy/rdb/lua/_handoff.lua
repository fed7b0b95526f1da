-- _handoff.lua: a fragment, included by the enqueue and forward scripts (the loader pastes it at "-- #include _handoff.lua").
-- When a worker of ours waits idle on this queue (a live member of the waiters zset) and the queue is not
-- paused, the oldest pending task is dequeued for it right here, exactly as dequeue.lua does (active,
-- lease, state, pending_since removed), and pushed to that worker's hand-off list, on which it blocks:
-- Limits hold here as in dequeue.lua (needs _limits.lua included first).
-- one network hop from producer to handler instead of wake-up + dequeue. Otherwise idle workers are woken
-- on the wake channel. The hand-off list holds "<id length>:<id><msg>" and expires if nobody reads it.
local function handoff(waiters, paused, pending, active, lease, now, lease_expiry, task_prefix, handoff_prefix)
  if redis.call("EXISTS", paused) == 1 then
    return false
  end
  local w = redis.call("ZRANGEBYSCORE", waiters, now, "+inf", "LIMIT", 0, 1)[1]
  if not w then
    return false
  end
  -- a task over its limit waits on that limit instead (see _limits.lua); the next one may go (a few at most)
  local lp = limits_prefix_of(pending)
  local list = load_limits(lp)
  local id, msg
  for _ = 1, 10 do
    id = redis.call("RPOPLPUSH", pending, active)
    if not id then
      return false
    end
    local key = task_prefix .. id
    msg = redis.call("HGET", key, "msg")
    if not msg then
      redis.call("LREM", active, 1, id)
      return false
    end
    local m, again
    if list then
      m, again = admit(lp, lease, limits_of(list, msg), id, math.floor(tonumber(now) * 1000), lease_expiry)
    end
    if not m then
      break
    end
    redis.call("LREM", active, 1, id)
    block(lp, key, id, m, again)
    msg = nil
  end
  if not msg then
    return false
  end
  redis.call("ZREM", waiters, w)
  local key = task_prefix .. id
  redis.call("HSET", key, "state", "active")
  redis.call("HDEL", key, "pending_since")
  redis.call("ZADD", lease, lease_expiry, id)
  local box = handoff_prefix .. w
  redis.call("LPUSH", box, string.len(id) .. ":" .. id .. msg)
  redis.call("EXPIRE", box, 60)
  return true
end

local function handoff_or_wake(waiters, paused, pending, active, lease, now, lease_expiry, task_prefix,
                               handoff_prefix, channel, queue)
  if not handoff(waiters, paused, pending, active, lease, now, lease_expiry, task_prefix, handoff_prefix)
      and channel ~= "" then
    redis.call("PUBLISH", channel, queue)
  end
end
