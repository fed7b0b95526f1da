-- queue_info: every count of one queue, its oldest pending task and soonest due times, in one step (read only).
-- KEYS[1] pending   KEYS[2] active   KEYS[3] scheduled   KEYS[4] retry   KEYS[5] archived   KEYS[6] completed
-- KEYS[7] paused   KEYS[8] groups set   KEYS[9] processed:<day>   KEYS[10] failed:<day>
-- KEYS[11] processed (all time)   KEYS[12] failed (all time)   KEYS[13] our exact due times asynqpy:{q}:due
-- ARGV[1] task key prefix   ARGV[2] group key prefix   ARGV[3] memory sample size (0 = do not sample memory)
-- ARGV[4] retry sample size: the retry tasks due soonest whose last failure time is read
-- returns {pending, active, scheduled, retry, archived, completed, aggregating, groups, paused (0/1),
--   processed, failed, processed total, failed total (strings, '' when unset), oldest pending_since (ns string, ''),
--   soonest scheduled and retry due times ('': none; the first task's exact due time where it fits its score),
--   approximate memory in bytes (-1 when not sampled),
--   oldest archived score (''), earliest last_failed_at among the sampled retry tasks (Unix s, 0 when none)}
-- #include _due.lua
local function first_due(key)
  local s = redis.call("ZRANGE", key, 0, 0, "WITHSCORES")
  if not s[2] then return "" end
  local exact = redis.call("ZSCORE", KEYS[13], s[1])
  if exact and exact_fits(s[2], exact) then return exact end
  return s[2]
end
local function mem(key)
  return tonumber(redis.call("MEMORY", "USAGE", key) or 0) or 0
end
local function sampled(ids, total)
  if #ids == 0 then return 0 end
  local sum = 0
  for _, id in ipairs(ids) do sum = sum + mem(ARGV[1] .. id) end
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
local n = tonumber(ARGV[3])
local counts = {redis.call("LLEN", KEYS[1]), redis.call("LLEN", KEYS[2])}
for i = 3, 6 do counts[i] = redis.call("ZCARD", KEYS[i]) end
local groups = redis.call("SMEMBERS", KEYS[8])
local aggregating, memory = 0, -1
for _, g in ipairs(groups) do aggregating = aggregating + redis.call("ZCARD", ARGV[2] .. g) end
if n > 0 then
  memory = 0
  for i = 1, 2 do memory = memory + sampled(redis.call("LRANGE", KEYS[i], 0, n - 1), counts[i]) + mem(KEYS[i]) end
  for i = 3, 6 do memory = memory + sampled(redis.call("ZRANGE", KEYS[i], 0, n - 1), counts[i]) + mem(KEYS[i]) end
  local ids = {}
  for i = 1, math.min(5, #groups) do
    local gkey = ARGV[2] .. groups[i]
    memory = memory + mem(gkey)
    for _, id in ipairs(redis.call("ZRANGE", gkey, 0, n - 1)) do ids[#ids + 1] = id end
  end
  memory = memory + sampled(ids, aggregating)
end
local since = ""
local oldest = redis.call("LRANGE", KEYS[1], -1, -1)[1]
if oldest then since = redis.call("HGET", ARGV[1] .. oldest, "pending_since") or "" end
local out = {counts[1], counts[2], counts[3], counts[4], counts[5], counts[6], aggregating, #groups,
  redis.call("EXISTS", KEYS[7])}
for i = 9, 12 do out[#out + 1] = redis.call("GET", KEYS[i]) or "" end
out[#out + 1] = since
out[#out + 1] = first_due(KEYS[3])
out[#out + 1] = first_due(KEYS[4])
out[#out + 1] = memory
out[#out + 1] = (redis.call("ZRANGE", KEYS[5], 0, 0, "WITHSCORES")[2] or "")
local failed_at = 0
for _, id in ipairs(redis.call("ZRANGE", KEYS[4], 0, tonumber(ARGV[4]) - 1)) do
  local msg = redis.call("HGET", ARGV[1] .. id, "msg")
  local t = msg and last_failed_at(msg) or 0
  if t > 0 and (failed_at == 0 or t < failed_at) then failed_at = t end
end
out[#out + 1] = failed_at
return out
