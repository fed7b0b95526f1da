-- search: scan one bounded window of a state and return the tasks whose message may match (read only).
-- The match here is a superset (plain substring tests on the lower-cased raw message); the caller decodes
-- the rows and applies the exact filters.
-- KEYS[1] the state's list or sorted set (or a group's sorted set)
-- ARGV[1] "list" or "zset"   ARGV[2] start   ARGV[3] stop (LRANGE / ZRANGE indexes)   ARGV[4] task key prefix
-- ARGV[5] id prefix ('' = any)   ARGV[6..] needles, already lower-cased (ASCII); every one must occur
-- returns {ids scanned, then per candidate: position in the window (1-based), id, score, msg, state, result,
--   pending_since, asynqpy_error} (a missing value is the integer 0)
local list = ARGV[1] == "list"
local ids
if list then
  ids = redis.call("LRANGE", KEYS[1], ARGV[2], ARGV[3])
else
  ids = redis.call("ZRANGE", KEYS[1], ARGV[2], ARGV[3], "WITHSCORES")
end
local step = list and 1 or 2
local out = {math.floor(#ids / step)}
local prefix = ARGV[5]
for i = 1, #ids, step do
  local id = ids[i]
  if prefix == "" or string.sub(id, 1, #prefix) == prefix then
    local f = redis.call("HMGET", ARGV[4] .. id, "msg", "state", "result", "pending_since", "asynqpy_error")
    local hay = string.lower((f[1] or "") .. "\0" .. (f[5] or ""))
    local ok = true
    for j = 6, #ARGV do
      if not string.find(hay, ARGV[j], 1, true) then ok = false break end
    end
    if ok then
      out[#out + 1] = (i + step - 1) / step
      out[#out + 1] = id
      out[#out + 1] = list and 0 or ids[i + 1]
      for j = 1, 5 do out[#out + 1] = f[j] or 0 end
    end
  end
end
return out
