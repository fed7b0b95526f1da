-- _handoff.lua: a fragment, included by the enqueue and forward scripts (the loader pastes it at "-- #include _handoff.lua").
-- When a worker of ours waits idle on this queue (a live member of the waiters zset) and the queue is not
-- paused, the oldest pending task is dequeued for it right here, exactly as dequeue.lua does (active,
-- lease, state, pending_since removed), and pushed to that worker's hand-off list, on which it blocks:
-- Limits hold here as in dequeue.lua (needs _limits.lua included first).
-- one network hop from producer to handler instead of wake-up + dequeue. Otherwise idle workers are woken
-- on the wake channel. The hand-off list holds "<id length>:<id><msg>" and expires if nobody reads it.

-- True when the queue of this pending list has no pause, no limits (nor tasks waiting on one) and no backpressure
-- limit (see _room.lua): one EXISTS for what live_waiter, load_limits and refusal would each ask (an enqueue's
-- common case; load_limits is told). fresh (optional): the key of a task about to be stored, asked in the same
-- EXISTS: true then also says that no task has this key; false says only that one of the keys exists (the caller
-- asks again without it).
local function plain_queue(pending, paused, fresh)
  local lp = limits_prefix_of(pending)
  local n
  if fresh then
    n = redis.call("EXISTS", paused, lp .. "limits", lp .. "lwaiting", lp .. "qlimit", fresh)
  else
    n = redis.call("EXISTS", paused, lp .. "limits", lp .. "lwaiting", lp .. "qlimit")
  end
  if n == 0 then
    loaded[lp] = false
    return true
  end
  return false
end

local no_waiter = {}  -- waiters sets found paused or with no live registration in this call (neither changes during it)

-- The worker a task may be handed to now: nil when the queue is paused or no registration is live. plain: the
-- queue is not paused (plain_queue said so). (Read, not popped: a script's first write, ZPOPMAX too, would lift
-- Redis's OOM refusal of the enqueue's HSET.)
local function live_waiter(waiters, paused, now, plain)
  if no_waiter[waiters] then
    return nil
  end
  local w
  if plain or redis.call("EXISTS", paused) == 0 then
    w = redis.call("ZRANGEBYSCORE", waiters, now, "+inf", "LIMIT", 0, 1)[1]
  end
  if not w then
    no_waiter[waiters] = true
  end
  return w
end

-- An active task (in the active list, its hash saying so) leased to worker w, whose registration it consumes, and
-- pushed to w's hand-off list.
local function hand_to(w, waiters, lease, lease_expiry, handoff_prefix, id, msg)
  redis.call("ZREM", waiters, w)
  redis.call("ZADD", lease, lease_expiry, id)
  local box = handoff_prefix .. w
  redis.call("LPUSH", box, string.len(id) .. ":" .. id .. msg)
  redis.call("EXPIRE", box, 60)
end

-- w: the live waiter when the caller found it already (live_waiter), else nil.
local function handoff(waiters, paused, pending, active, lease, now, lease_expiry, task_prefix, handoff_prefix, w)
  w = w or live_waiter(waiters, paused, now)
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
      local lib = limits_lib()
      local matched = lib.limits_of(list, msg)
      -- behind the tasks waiting on its partition (then at once: score 0, and the caller wakes idle workers, whose
      -- fetch starts the oldest of them when there is room)
      m = list.waiting and lib.queued(lp, matched)
      if not m then
        m, again = lib.admit(lp, lease, matched, id, math.floor(tonumber(now) * 1000), lease_expiry)
      end
    end
    if not m then
      break
    end
    redis.call("LREM", active, 1, id)
    limits_lib().block(lp, key, id, m, again)
    msg = nil
  end
  if not msg then
    return false
  end
  local key = task_prefix .. id
  redis.call("HSET", key, "state", "active")
  redis.call("HDEL", key, "pending_since")
  hand_to(w, waiters, lease, lease_expiry, handoff_prefix, id, msg)
  return true
end

-- A new task (hash key, id, msg; fields: more fields of its hash, as a flat list) enters its queue: stored pending
-- (since: pending_since), then the oldest pending task goes to a live waiter, or idle workers are woken on the
-- channel. In the idle case (a live waiter, nothing pending before it, no limits on the queue) the task goes to
-- the waiter as it is stored, active: the state the pending round leaves (LPUSH, RPOPLPUSH, HGET, HSET, HDEL), in
-- three commands fewer, on an idle worker's pickup path. plain: what plain_queue said.
local function enqueue_new(key, id, msg, fields, since, waiters, paused, pending, active, lease, now, lease_expiry,
                           task_prefix, handoff_prefix, channel, queue, plain)
  local w = live_waiter(waiters, paused, now, plain)
  if w and redis.call("LLEN", pending) == 0 and not load_limits(limits_prefix_of(pending)) then
    redis.call("HSET", key, "msg", msg, "state", "active", unpack(fields))
    redis.call("LPUSH", active, id)
    hand_to(w, waiters, lease, lease_expiry, handoff_prefix, id, msg)
    return
  end
  redis.call("HSET", key, "msg", msg, "state", "pending", "pending_since", since, unpack(fields))
  redis.call("LPUSH", pending, id)
  if not (w and handoff(waiters, paused, pending, active, lease, now, lease_expiry, task_prefix, handoff_prefix, w))
      and channel ~= "" then
    redis.call("PUBLISH", channel, queue)
  end
end
