-- dequeue: move up to N pending tasks to active, each with a lease, in one step (asynq's Dequeue, batched).
-- KEYS[1] pending   KEYS[2] paused   KEYS[3] active   KEYS[4] lease
-- ARGV[1] lease expiry (Unix s)   ARGV[2] task key prefix   ARGV[3] max tasks
-- ARGV[4] "1" to add each task's pending_since (ns string, '' when unset) after its msg (optional); "2" to add
-- that and then the limit the task waited on (its limit_wait field: a limit's name, '' when it did not wait)
-- returns a flat list id1, msg1, id2, msg2, ... (id, msg, since triples with ARGV[4]; empty when paused or
-- nothing is pending).
-- An id whose hash is gone is dropped from active rather than handed out.
-- With limits on the queue (see _limits.lua), the tasks waiting for a limit that now has room start first,
-- and a pending task over its limit goes to that limit's wait list instead of starting (at most
-- MAX_BLOCKED of them per call, to bound the script's time).
-- #include _clock.lua
-- #include _limits.lua
if redis.call("EXISTS", KEYS[2]) == 1 then
  return {}
end
local MAX_BLOCKED = 100
local out = {}
local with_since = ARGV[4] == "1" or ARGV[4] == "2"
local with_wait = ARGV[4] == "2"
local max = tonumber(ARGV[3])
local n = 0
local lp = limits_prefix_of(KEYS[1])
local list = load_limits(lp)
local now_ms  -- read (TIME) only when a task falls under a limit: an unlimited type does not pay for it
local function now()
  now_ms = now_ms or clock("").ms
  return now_ms
end

local function start(id, key, msg)
  local f = with_since and redis.call("HMGET", key, "pending_since", "limit_wait")
  redis.call("HSET", key, "state", "active")
  redis.call("HDEL", key, "pending_since", "limit_wait")
  redis.call("ZADD", KEYS[4], ARGV[1], id)
  out[#out + 1] = id
  out[#out + 1] = msg
  if with_since then out[#out + 1] = f[1] or "" end
  if with_wait then out[#out + 1] = f[2] or "" end
  n = n + 1
end

if list and list.waiting then
  -- the waiting tasks first, the partitions to look at again soonest first
  for _, member in ipairs(redis.call("ZRANGE", lp .. "lwaiting", 0, 19)) do
    if n >= max then
      break
    end
    local wl = lp .. "lwait:" .. member
    local again
    while n < max do
      local id = redis.call("LINDEX", wl, -1)
      if not id then
        break
      end
      local key = ARGV[2] .. id
      local msg = redis.call("HGET", key, "msg")
      local st = redis.call("HMGET", key, "limit_wait", "state")
      if not msg or not st[1] or st[2] ~= "pending" then
        unwait(lp, wl)  -- deleted, archived or started meanwhile (Inspector)
      else
        local matched = limits_of(list, msg)
        local m, at = admit(lp, KEYS[4], matched, id, now(), ARGV[1])
        if not m then
          unwait(lp, wl)
          redis.call("LPUSH", KEYS[3], id)
          start(id, key, msg)
        elseif m.l.name .. "\n" .. m.part == member then
          again = at
          break
        else
          unwait(lp, wl)  -- waits for another limit now
          block(lp, key, id, m, at)
        end
      end
    end
    if redis.call("LLEN", wl) == 0 then
      redis.call("ZREM", lp .. "lwaiting", member)
    elseif again then
      redis.call("ZADD", lp .. "lwaiting", again, member)
    end
  end
end

local blocked = 0
while n < max do
  local id = redis.call("RPOPLPUSH", KEYS[1], KEYS[3])
  if not id then
    break
  end
  local key = ARGV[2] .. id
  local msg = redis.call("HGET", key, "msg")
  if not msg then
    redis.call("LREM", KEYS[3], 1, id)
  else
    local m, at
    local matched = list and limits_of(list, msg)
    if matched and #matched > 0 then
      m, at = admit(lp, KEYS[4], matched, id, now(), ARGV[1])
    end
    if m then
      redis.call("LREM", KEYS[3], 1, id)
      block(lp, key, id, m, at)
      blocked = blocked + 1
      if blocked >= MAX_BLOCKED then
        break
      end
    else
      start(id, key, msg)
    end
  end
end
return out
