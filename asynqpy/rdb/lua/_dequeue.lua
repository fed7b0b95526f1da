-- _dequeue.lua: a fragment (pasted at "-- #include _dequeue.lua", after _clock.lua and _limits.lua): one
-- queue's part of a dequeue, shared by dequeue.lua (one queue) and dequeue_queues.lua (several in one call).
-- take(q, max, expiry, with_since, with_wait, tag, out) moves up to max pending tasks of q to active, each with
-- a lease until expiry, appending (tag first, when not nil: dequeue_queues' queue index) id, msg (then
-- pending_since: ns string, '' when unset, with with_since; then the limit the task waited on, '' when none, with
-- with_wait) to out.
-- q = {pending=, paused=, active=, lease=, prefix=} (the queue's keys and task key prefix; take() notes in q.open
-- whether it is paused, asked once per script). Returns how many it
-- started and whether it stopped short (paused, nothing more pending, or MAX_BLOCKED reached).
-- q.box (optional): the fetching server's hand-off list of q. What an enqueue script handed to it there (already
-- active and leased to it: see _handoff.lua) comes first, before any pending task, paused queue or not: such a
-- task holds the slot the server offered, so a fetch that took a pending task instead would leave it no slot
-- (it would go back to pending behind a task enqueued after it). Its lease is renewed to this fetch's expiry.
-- q.waiters, q.me, q.offered: the queue's waiters, the server's id, and whether its registration stood as far as
-- the server knows. When it did and is gone now while the list was empty, a hand-off consumed it and the
-- server's lane popped the task already and is about to start it: take_handed() then says one slot is held
-- (the caller takes one task fewer), so that the lane finds the slot it offered. When it did and still stands,
-- the list is empty (see register_waiter.lua) and is not asked: an idle poll's one command per queue here.
-- An id whose hash is gone is dropped from active rather than handed out.
-- With limits on the queue (see _limits.lua), the tasks waiting for a limit that now has room start first,
-- and a pending task over its limit goes to that limit's wait list instead of starting (at most
-- MAX_BLOCKED of them per call, to bound the script's time).
local MAX_BLOCKED = 100
local WAIT_SCAN = 20  -- partitions with waiting tasks looked at per call
local WAKE_CHANNEL = "asynqpy:wake"  -- keys.WAKE_CHANNEL: a message names a queue whose idle workers fetch now

-- a task of q starts: active, leased until expiry, its row appended to out (see take). f, o: when the caller read
-- them already (with its msg), the task's pending_since and limit_wait are f[o + 1] and f[o + 2]; else (f nil)
-- they are read here
local function start(q, id, key, msg, expiry, with_since, with_wait, tag, out, f, o)
  if with_since and not f then
    f, o = redis.call("HMGET", key, "pending_since", "limit_wait"), 0
  end
  redis.call("HSET", key, "state", "active")
  redis.call("HDEL", key, "pending_since", "limit_wait")
  redis.call("ZADD", q.lease, expiry, id)
  if tag ~= nil then out[#out + 1] = tag end
  out[#out + 1] = id
  out[#out + 1] = msg
  if with_since then out[#out + 1] = f[o + 1] or "" end
  if with_wait then out[#out + 1] = f[o + 2] or "" end
end

-- what an enqueue script handed to this server in q (see q.box above), its rows appended as start()'s; returns
-- how many it took and how many slots its lane holds (1 when a hand-off was consumed and the lane popped it)
local function take_handed(q, max, expiry, with_since, with_wait, tag, out)
  -- A registration stands only while its list is empty (register_waiter.lua refuses while the list holds a task;
  -- a hand-off removes the registration it uses): an idle poll that finds it standing asks nothing more.
  if q.offered and redis.call("ZSCORE", q.waiters, q.me) then
    return 0, 0
  end
  local n = 0
  local since, popped
  -- read before popping: a script's first write lifts Redis's OOM refusal for the writes after it
  while n < max and redis.call("LLEN", q.box) > 0 do
    local item = redis.call("RPOP", q.box)  -- the oldest first (enqueue scripts LPUSH)
    local colon = string.find(item, ":", 1, true)
    local len = tonumber(string.sub(item, 1, colon - 1))
    local id = string.sub(item, colon + 1, colon + len)
    popped = true
    if redis.call("ZSCORE", q.lease, id) then  -- (not when the recoverer took it back meanwhile)
      redis.call("ZADD", q.lease, expiry, id)
      if tag ~= nil then out[#out + 1] = tag end
      out[#out + 1] = id
      out[#out + 1] = string.sub(item, colon + len + 1)
      since = since or clock("").ns  -- it never sat in pending: it waited for no one
      if with_since then out[#out + 1] = since end
      if with_wait then out[#out + 1] = "" end
      n = n + 1
    end
  end
  if not popped and q.offered and n < max then  -- (its registration is gone: asked above)
    return n, 1
  end
  return n, 0
end

local function take(q, max, expiry, with_since, with_wait, tag, out)
  local handed, held = 0, 0
  if q.box then
    handed, held = take_handed(q, max, expiry, with_since, with_wait, tag, out)
    max = max - held
  end
  local lp = limits_prefix_of(q.pending)
  if q.open == nil then
    -- one EXISTS answers both questions in the common case (neither paused nor limited: 0); an idle worker
    -- asks every queue once per poll
    if loaded[lp] == nil and redis.call("EXISTS", q.paused, lp .. "limits", lp .. "lwaiting") == 0 then
      loaded[lp] = false
      q.open = true
    else
      q.open = redis.call("EXISTS", q.paused) == 0
    end
  end
  if not q.open then
    return handed, true
  end
  local n = handed
  local list = load_limits(lp)
  local now_ms  -- read (TIME) only when a task falls under a limit: an unlimited type does not pay for it

  if list and list.waiting then
    local lib = limits_lib()
    -- the waiting tasks first, the partitions to look at again soonest first, WAIT_SCAN of them. With more, one
    -- that stays blocked goes behind the first one not looked at (its score: when to look again, at the
    -- earliest), so the next fetch looks at the others: a freed slot frees nothing in the score (a finished task
    -- tells no one), so else the same WAIT_SCAN blocked partitions would be the only ones looked at while their
    -- holders run, and a partition further on with room would not start
    local scan = redis.call("ZRANGE", lp .. "lwaiting", 0, WAIT_SCAN, "WITHSCORES")
    local behind = scan[2 * WAIT_SCAN + 2] and tonumber(scan[2 * WAIT_SCAN + 2]) + 0.001
    for i = 1, math.min(#scan, 2 * WAIT_SCAN), 2 do
      local member = scan[i]
      if n >= max then
        break
      end
      local wl = lp .. "lwait:" .. member
      local again, blocked_here
      while n < max do
        local id = redis.call("LINDEX", wl, -1)
        if not id then
          break
        end
        local key = q.prefix .. id
        local msg = redis.call("HGET", key, "msg")
        local st = redis.call("HMGET", key, "limit_wait", "state")
        if not msg or not st[1] or st[2] ~= "pending" then
          lib.unwait(lp, wl)  -- deleted, archived or started meanwhile (Inspector)
        else
          local matched = lib.limits_of(list, msg)
          now_ms = now_ms or clock("").ms
          local m, at = lib.admit(lp, q.lease, matched, id, now_ms, expiry)
          if not m then
            lib.unwait(lp, wl)
            redis.call("LPUSH", q.active, id)
            start(q, id, key, msg, expiry, with_since, with_wait, tag, out)
            n = n + 1
          elseif m.l.name .. "\n" .. m.part == member then
            again, blocked_here = at, true
            break
          else
            lib.unwait(lp, wl)  -- waits for another limit now
            lib.block(lp, key, id, m, at)
          end
        end
      end
      if redis.call("LLEN", wl) == 0 then
        redis.call("ZREM", lp .. "lwaiting", member)
      elseif behind and blocked_here and not (again and again > behind) then
        redis.call("ZADD", lp .. "lwaiting", behind, member)
      elseif again then
        redis.call("ZADD", lp .. "lwaiting", again, member)
      end
    end
  end

  local blocked = 0
  while n < max do
    local id = redis.call("RPOPLPUSH", q.pending, q.active)
    if not id then
      return n, true
    end
    local key = q.prefix .. id
    -- the msg and, when wanted, the fields start() returns, in one call
    local f = with_since and redis.call("HMGET", key, "msg", "pending_since", "limit_wait")
    local msg
    if f then
      msg = f[1]
    else
      msg = redis.call("HGET", key, "msg")
    end
    if not msg then
      redis.call("LREM", q.active, 1, id)
    else
      local m, at
      local matched = list and limits_lib().limits_of(list, msg)
      if matched and #matched > 0 then
        now_ms = now_ms or clock("").ms
        m, at = limits_lib().admit(lp, q.lease, matched, id, now_ms, expiry)
      end
      if m then
        redis.call("LREM", q.active, 1, id)
        limits_lib().block(lp, key, id, m, at)
        blocked = blocked + 1
        if blocked >= MAX_BLOCKED then
          -- more tasks may be behind them (a burst of a limited type): the queue's idle workers, this one too,
          -- are woken (asynqpy/subscriber.py) so that the next call comes now; else it came at the next idle poll,
          -- and a task of another type behind a long stretch of limited ones waited a poll per MAX_BLOCKED
          if redis.call("LLEN", q.pending) > 0 then
            redis.call("PUBLISH", WAKE_CHANNEL, string.sub(q.pending, 8, -10))
          end
          return n, true
        end
      else
        start(q, id, key, msg, expiry, with_since, with_wait, tag, out, f, 1)
        n = n + 1
      end
    end
  end
  return n, false
end
