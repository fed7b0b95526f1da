-- _queue_info.lua: a fragment (pasted at "-- #include _queue_info.lua", after _due.lua): one queue's info.
-- queue_info(k, task_prefix, group_prefix, memory_n, retry_n, fingerprint), k the queue's 13 keys:
--   pending, active, scheduled, retry, archived, completed, paused, groups set, processed:<day>, failed:<day>,
--   processed (all time), failed (all time), our exact due times asynqpy:{q}:due.
-- The fingerprint is the queue's six sizes, paused flag (0/1), group count and the four counters (unset: 0)
-- joined by commas; when it is not '' and still holds, the reply is 0 and nothing more is read (the caller keeps
-- what it had). Else the reply is {pending, active, scheduled, retry, archived, completed, aggregating, groups,
--   paused (0/1), processed, failed, processed total, failed total (strings), oldest pending_since (ns string,
--   ''), soonest scheduled and retry due times ('': none; the first task's exact due time where it fits its
--   score), approximate memory in bytes (-1 when not sampled: memory_n 0), oldest archived score (''),
--   earliest last_failed_at among the retry_n retry tasks due soonest (Unix s, 0 when none)}.
local function first_due(key, exact_key)
  local s = redis.call("ZRANGE", key, 0, 0, "WITHSCORES")
  if not s[2] then return "" end
  local exact = redis.call("ZSCORE", exact_key, s[1])
  if exact and exact_fits(s[2], exact) then return exact end
  return s[2]
end
local function mem(key)
  return tonumber(redis.call("MEMORY", "USAGE", key) or 0) or 0
end
local function sampled(prefix, ids, total)
  if #ids == 0 then return 0 end
  local sum = 0
  for _, id in ipairs(ids) do sum = sum + mem(prefix .. id) end
  return math.floor(sum / #ids * total)
end
-- A protobuf varint at position i of s: its value and the position after it.
local function varint(s, i)
  local v, m = 0, 1
  while i <= #s do
    local b = string.byte(s, i)
    i = i + 1
    v = v + (b % 128) * m
    if b < 128 then return v, i end
    m = m * 128
  end
  return nil, i
end
-- TaskMessage.last_failed_at (field 11, a varint) of an encoded message; 0 when unset or unreadable.
local function last_failed_at(s)
  local i = 1
  while i <= #s do
    local tag
    tag, i = varint(s, i)
    if not tag then return 0 end
    local field, wire = math.floor(tag / 8), tag % 8
    if wire == 0 then
      local v
      v, i = varint(s, i)
      if field == 11 then return v or 0 end
    elseif wire == 2 then
      local len
      len, i = varint(s, i)
      if not len then return 0 end
      i = i + len
    elseif wire == 1 then i = i + 8
    elseif wire == 5 then i = i + 4
    else return 0 end
  end
  return 0
end
local function memory_of(k, taskp, groupp, n, counts, groups, aggregating)
  local memory = 0
  for i = 1, 2 do memory = memory + sampled(taskp, redis.call("LRANGE", k[i], 0, n - 1), counts[i]) + mem(k[i]) end
  for i = 3, 6 do memory = memory + sampled(taskp, redis.call("ZRANGE", k[i], 0, n - 1), counts[i]) + mem(k[i]) end
  local ids = {}
  for i = 1, math.min(5, #groups) do
    local gkey = groupp .. groups[i]
    memory = memory + mem(gkey)
    for _, id in ipairs(redis.call("ZRANGE", gkey, 0, n - 1)) do ids[#ids + 1] = id end
  end
  return memory + sampled(taskp, ids, aggregating)
end
local function queue_info(k, taskp, groupp, n, retry_n, fingerprint)
  local c = {redis.call("LLEN", k[1]), redis.call("LLEN", k[2])}
  for i = 3, 6 do c[i] = redis.call("ZCARD", k[i]) end
  c[7] = redis.call("EXISTS", k[7])
  c[8] = redis.call("SCARD", k[8])
  local counters = redis.call("MGET", k[9], k[10], k[11], k[12])
  for i = 1, 4 do c[8 + i] = counters[i] or "0" end
  if fingerprint ~= "" and table.concat(c, ",") == fingerprint then return 0 end
  local groups = c[8] > 0 and redis.call("SMEMBERS", k[8]) or {}
  local aggregating, memory = 0, -1
  for _, g in ipairs(groups) do aggregating = aggregating + redis.call("ZCARD", groupp .. g) end
  if n > 0 then memory = memory_of(k, taskp, groupp, n, c, groups, aggregating) end
  local since = ""
  local oldest = redis.call("LRANGE", k[1], -1, -1)[1]
  if oldest then since = redis.call("HGET", taskp .. oldest, "pending_since") or "" end
  local out = {c[1], c[2], c[3], c[4], c[5], c[6], aggregating, #groups, c[7], c[9], c[10], c[11], c[12], since,
    first_due(k[3], k[13]), first_due(k[4], k[13]), memory,
    (redis.call("ZRANGE", k[5], 0, 0, "WITHSCORES")[2] or "")}
  local failed_at = 0
  for _, id in ipairs(redis.call("ZRANGE", k[4], 0, retry_n - 1)) do
    local msg = redis.call("HGET", taskp .. id, "msg")
    local t = msg and last_failed_at(msg) or 0
    if t > 0 and (failed_at == 0 or t < failed_at) then failed_at = t end
  end
  out[19] = failed_at
  return out
end
