-- _limits.lua: a fragment (pasted at "-- #include _limits.lua"): fleet-wide limits, enforced where a task starts
-- (dequeue.lua and the hand-off in _handoff.lua), so no two workers can both take the last slot or token.
-- A queue's limits sit in the hash asynqpy:{q}:limits (the queue's hash tag, so every key here shares its
-- Cluster slot): name (the pattern as the user wrote it) -> "lua pattern \t concurrency \t rate/s \t burst \t
-- key" (0 = no such limit; key '' = one partition, header.X or payload.X = per value). Written by
-- asynqpy/limits.py. Keys under lp = "asynqpy:{q}:":
--   lslot:<name>:<part>  zset: the tasks holding a concurrency slot. A slot is held only while its task holds
--                        its lease (in the lease zset, not expired): nothing releases it, so no permit leaks
--                        when a worker dies; it is pruned when the limit looks full.
--   ltok:<name>:<part>   hash tokens, ms: the token bucket of a rate.
--   lwait:<name>\n<part> list: tasks over that limit, oldest at the right; they left pending, so the tasks
--                        behind them start (no head-of-line blocking). Not a retry, not a failure.
--   lwaitn               how many tasks all the wait lists hold (backpressure counts them: _room.lua)
--   lwaits               hash name -> how many times a task was held back by it (a counter, for metrics)
--   lwaiting             zset "<name>\n<part>" -> when to look again (Unix s): the next token, or the first
--                        lease expiry of the slot holders. dequeue.lua looks at the first ones every time (a
--                        finished task frees its slot without telling anyone); forward.lua wakes idle workers
--                        when one is due, so no worker polls for a blocked type.
--   ltypes               hash task type -> the names of the limits it matches, tab-joined ('' for none): the
--                        type index, filled by these scripts the first time they see a type, so a task costs
--                        one HGET however many limits are defined (not a match of every pattern). Dropped in
--                        the same step as the queue's set of limits changes (write_limits.lua); holds at most
--                        INDEX_MAX types (then begins again) and expires INDEX_TTL s after it began, so types
--                        no longer seen do not pile up.


-- the queue's limits as one script call sees them: nil when the queue has none, else a cache filled as tasks
-- come: byname (name -> {name, raw, pat?}), types (type -> its limits), all (every limit, read only when a type
-- missing from the index comes), waiting (true when some task waits on a limit). One EXISTS tells both, the
-- limits counted twice (EXISTS counts a key as often as it is named): 2 or 3 with limits, odd with tasks
-- waiting. Tasks may wait on a queue left without limits (a limit removed from its copy by a step that did not
-- send them back: a server's start copying the fleet's limits, a `limit rm` cut short): the wait lists are
-- looked at then too, so they start (they fall under no limit) rather than wait forever out of pending.
-- Read once per script call (an enqueue_many hands off many tasks; no script here writes the limits), so
-- waiting is as it was at the first call.
local loaded = {}
local function load_limits(lp)
  local list = loaded[lp]
  if list == nil then
    local n = redis.call("EXISTS", lp .. "limits", lp .. "limits", lp .. "lwaiting")
    list = n > 0 and {lp = lp, byname = {}, types = {}, waiting = n % 2 == 1}
    loaded[lp] = list
  end
  return list or nil
end

-- limits_prefix_of("asynq:{q}:pending") = "asynqpy:{q}:"
local function limits_prefix_of(pending)
  return "asynqpy:" .. string.sub(pending, 7, -8)
end

-- The rest is made the first time a script call meets a queue with limits (limits_lib()), not at each call: some
-- 20 closures that a call on queues without limits (the common case) would make and drop (about 7 us of an
-- enqueue's server time warm, 15 us after an idle spell).
local limits_made
local function limits_lib()
  if limits_made then
    return limits_made
  end
  local INDEX_MAX = 1000
  local INDEX_TTL = 600  -- also bounds how long a limit written by an older asynqpy (no index drop) goes unseen

  local function pb_varint(s, i)
    local n, mul = 0, 1
    while true do
      local b = string.byte(s, i)
      if not b then
        return nil, i
      end
      i = i + 1
      n = n + (b % 128) * mul
      if b < 128 then
        return n, i
      end
      mul = mul * 128
    end
  end

  -- the length-delimited fields of a protobuf message: field number -> list of raw values
  local function pb_strings(msg)
    local i, len, out = 1, #msg, {}
    while i <= len do
      local tag
      tag, i = pb_varint(msg, i)
      if not tag then
        break
      end
      local field, wire = math.floor(tag / 8), tag % 8
      if wire == 0 then
        local _
        _, i = pb_varint(msg, i)
      elseif wire == 2 then
        local n
        n, i = pb_varint(msg, i)
        if not n then
          break
        end
        local vals = out[field] or {}
        vals[#vals + 1] = string.sub(msg, i, i + n - 1)
        out[field] = vals
        i = i + n
      elseif wire == 1 then
        i = i + 8
      elseif wire == 5 then
        i = i + 4
      else
        break
      end
    end
    return out
  end

  local function limit_named(list, name, raw)
    local l = list.byname[name]
    if not l then
      l = {name = name, raw = raw}
      list.byname[name] = l
    end
    return l
  end

  local function all_limits(list)
    if not list.all then
      local raw = redis.call("HGETALL", list.lp .. "limits")
      list.all = {}
      for i = 1, #raw, 2 do
        local l = limit_named(list, raw[i], raw[i + 1])
        l.pat = string.sub(l.raw, 1, (string.find(l.raw, "\t", 1, true) or 0) - 1)
        list.all[#list.all + 1] = l
      end
    end
    return list.all
  end

  -- the limits of the index entry `names`, or nil when one of them is gone (the index is stale: a writer that
  -- did not drop it)
  local function indexed(list, names)
    local got, want = {}, {}
    for name in string.gmatch(names, "[^\t]+") do
      if list.byname[name] then
        got[#got + 1] = list.byname[name]
      else
        want[#want + 1] = name
      end
    end
    if #want > 0 then
      local raws = redis.call("HMGET", list.lp .. "limits", unpack(want))
      for i, name in ipairs(want) do
        if not raws[i] then
          return nil
        end
        got[#got + 1] = limit_named(list, name, raws[i])
      end
    end
    return got
  end

  -- the limits type tt falls under: from the index, else matched against every pattern and written to it
  local function limits_for_type(list, tt)
    local got = list.types[tt]
    if got then
      return got
    end
    local idx = list.lp .. "ltypes"
    local names = redis.call("HGET", idx, tt)
    if names == "" then
      got = {}
    elseif names then
      got = indexed(list, names)
    end
    if not got then
      got = {}
      local found = {}
      for _, l in ipairs(all_limits(list)) do
        if string.find(tt, l.pat) then
          got[#got + 1] = l
          found[#found + 1] = l.name
        end
      end
      local size = redis.call("HLEN", idx)
      if size >= INDEX_MAX then
        redis.call("DEL", idx)
        size = 0
      end
      if #list.all == 0 then
        return got  -- no limits after all (a wait set left without them): nothing to index
      end
      redis.call("HSET", idx, tt, table.concat(found, "\t"))
      if size == 0 then
        redis.call("EXPIRE", idx, INDEX_TTL)
      end
    end
    list.types[tt] = got
    return got
  end

  local function parsed(l)
    if not l.conc then
      local _, c, r, b, k = string.match(l.raw, "^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t?(.*)$")
      l.conc, l.rate, l.burst, l.key = tonumber(c) or 0, tonumber(r) or 0, tonumber(b) or 1, k or ""
    end
    return l
  end

  -- the partition a task falls in: the value of a header (asynq TaskMessage field 15, map entries key=1
  -- value=2) or of a top-level field of a JSON payload (field 2); '' when it has none
  local function partition(key, fields)
    if key == "" then
      return ""
    end
    local kind, name = string.match(key, "^(%a+)%.(.+)$")
    if kind == "header" then
      for _, entry in ipairs(fields[15] or {}) do
        local e = pb_strings(entry)
        if e[1] and e[1][1] == name then
          return (e[2] or {""})[1]
        end
      end
    elseif kind == "payload" and fields[2] then
      local ok, doc = pcall(cjson.decode, fields[2][1])
      if ok and type(doc) == "table" then
        local v = doc[name]
        if type(v) == "string" or type(v) == "number" or type(v) == "boolean" then
          return tostring(v)
        end
      end
    end
    return ""
  end

  -- the task type: field 1, which asynq (and we) write first; else found by a full parse
  local function type_of(msg)
    if string.byte(msg, 1) == 10 then
      local n, i = pb_varint(msg, 2)
      if n then
        return string.sub(msg, i, i + n - 1)
      end
    end
    return (pb_strings(msg)[1] or {""})[1]
  end

  -- the limits a task message falls under: {l = limit, part = partition}, none when nothing matches (the message is
  -- parsed in full only for a limit with a partition key)
  local NONE = {}
  local function limits_of(list, msg)
    local of = limits_for_type(list, type_of(msg))
    if #of == 0 then
      return NONE  -- an unlimited type: nothing more to make
    end
    local got, fields = {}, nil
    for _, l in ipairs(of) do
      parsed(l)
      if l.key ~= "" and not fields then
        fields = pb_strings(msg)
      end
      got[#got + 1] = {l = l, part = partition(l.key, fields)}
    end
    return got
  end

  local function slot_key(lp, m)
    return lp .. "lslot:" .. m.l.name .. ":" .. m.part
  end

  local function bucket_key(lp, m)
    return lp .. "ltok:" .. m.l.name .. ":" .. m.part
  end

  -- room for one more under m? Returns true, or false and when to look again (Unix s)
  local function room(lp, lease, m, now_ms)
    local l = m.l
    if l.conc > 0 then
      local slots = slot_key(lp, m)
      if redis.call("ZCARD", slots) >= l.conc then
        local earliest
        for _, id in ipairs(redis.call("ZRANGE", slots, 0, -1)) do
          local s = tonumber(redis.call("ZSCORE", lease, id))
          if not s or s * 1000 <= now_ms then
            redis.call("ZREM", slots, id)  -- finished, or its worker died and its lease ran out
          else
            redis.call("ZADD", slots, s, id)  -- the lease may have been extended
            if not earliest or s < earliest then
              earliest = s
            end
          end
        end
        if redis.call("ZCARD", slots) >= l.conc then
          return false, earliest
        end
      end
    end
    if l.rate > 0 then
      local b = redis.call("HMGET", bucket_key(lp, m), "tokens", "ms")
      local tokens = tonumber(b[1]) or l.burst
      local at = tonumber(b[2]) or now_ms
      tokens = math.min(l.burst, tokens + math.max(0, now_ms - at) * l.rate / 1000)
      if tokens < 1 then
        return false, (now_ms + math.ceil((1 - tokens) * 1000 / l.rate)) / 1000
      end
      m.tokens = tokens
    end
    return true
  end

  -- two entries of a slot zset, drawn at random, leave it when their task no longer holds its lease (finished,
  -- or its worker died), as in room(); a live one is scored with its lease now. Called as a slot is taken (one
  -- entry in, two looked at), so the zset holds about twice the running tasks, not every task started since
  -- the limit was last full: with a large concurrency (50000), that many finished entries piled up, and the
  -- fetch that found the limit full pruned them all in one script call (120 ms with Redis blocked). (At random:
  -- the oldest by score would stall on a long-running holder, and equal scores sort by id.)
  local function trim(slots, lease, now_ms)
    for _, id in ipairs(redis.call("ZRANDMEMBER", slots, 2)) do
      local s = tonumber(redis.call("ZSCORE", lease, id))
      if not s or s * 1000 <= now_ms then
        redis.call("ZREM", slots, id)
      else
        redis.call("ZADD", slots, s, id)
      end
    end
  end

  -- admit: room under every limit, then take a slot and a token of each. Returns nil when the task may start,
  -- else the limit it waits for and when to look again
  local function admit(lp, lease, matched, id, now_ms, lease_expiry)
    for _, m in ipairs(matched) do
      local ok, again = room(lp, lease, m, now_ms)
      if not ok then
        return m, again
      end
    end
    for _, m in ipairs(matched) do
      if m.l.conc > 0 then
        local slots = slot_key(lp, m)
        trim(slots, lease, now_ms)
        redis.call("ZADD", slots, lease_expiry, id)
      end
      if m.l.rate > 0 then
        local b = bucket_key(lp, m)
        redis.call("HSET", b, "tokens", tostring(m.tokens - 1), "ms", tostring(now_ms))
        -- (bounded: a huge burst over a tiny rate, or a limit not written by limits.py, must not fail the
        -- whole dequeue with "value is not an integer or out of range"; nan fails the test too)
        local ttl = math.ceil(m.l.burst * 1000 / m.l.rate) + 60000
        if not (ttl < 1e15) then
          ttl = 1e15
        end
        redis.call("PEXPIRE", b, ttl)
      end
    end
    return nil
  end

  -- the first limit of matched that has tasks of the same partition waiting already, nil when none: a task handed to
  -- an idle worker (_handoff.lua) goes behind them rather than take the slot or token they wait for (else, with
  -- tasks coming at the rate of the limit or faster, each new one took the next token and the waiting ones never
  -- started)
  local function queued(lp, matched)
    for _, m in ipairs(matched) do
      if redis.call("ZSCORE", lp .. "lwaiting", m.l.name .. "\n" .. m.part) then
        return m
      end
    end
    return nil
  end

  -- the task waits on limit m (it is in no list of asynq's now; its state stays pending, limit_wait says why)
  local function block(lp, task_key, id, m, again)
    local member = m.l.name .. "\n" .. m.part
    redis.call("LPUSH", lp .. "lwait:" .. member, id)
    redis.call("ZADD", lp .. "lwaiting", "LT", again or 0, member)
    redis.call("HSET", task_key, "limit_wait", m.l.name)
    redis.call("HINCRBY", lp .. "lwaits", m.l.name, 1)
    redis.call("INCR", lp .. "lwaitn")
  end

  -- the last task of wait list wl leaves it (started, moved, or gone)
  local function unwait(lp, wl)
    redis.call("RPOP", wl)
    redis.call("DECR", lp .. "lwaitn")
  end

  limits_made = {limits_of = limits_of, admit = admit, queued = queued, block = block, unwait = unwait}
  return limits_made
end
