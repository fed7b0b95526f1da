-- find: judge one bounded window of a state's tasks by the query terms that need no payload (read only).
-- KEYS[1] the state's list or sorted set (or a group's)
-- ARGV[1] "list" or "zset"   ARGV[2] start   ARGV[3] stop (LRANGE / ZRANGE indexes)   ARGV[4] task key prefix
-- ARGV[5] the state   ARGV[6] now (Unix s)   ARGV[7] "rows", "ids" or "count"   ARGV[8] stop after this many matches
--   (0: judge the whole window)
-- ARGV[9..] terms, four values each: field (type id error retried age failed text), negated "1"/"0", op,
--   operand (type, id: an anchored Lua pattern; error: lower-cased text; text: lower-cased text that must be
--   in the raw message, a hint for a payload term the caller judges; others: a number compared with op)
-- Tasks are judged in asynq's order (a list's oldest, rightmost, first).
-- returns {tasks judged, tasks in the window, then per match: position in asynq's order in the window
--   (1-based), id, and for "rows" score, msg,
--   state, result, pending_since, asynqpy_error (a missing value is the integer 0), for "ids" sha1 of msg;
--   for "count" nothing per match: {judged, in the window, matches}}
-- #include _message.lua
-- #include _find_terms.lua
local list, state, now = ARGV[1] == "list", ARGV[5], tonumber(ARGV[6])
local ids
if list then ids = redis.call("LRANGE", KEYS[1], ARGV[2], ARGV[3])
else ids = redis.call("ZRANGE", KEYS[1], ARGV[2], ARGV[3], "WITHSCORES") end
local step = list and 1 or 2
local count = math.floor(#ids / step)
local out = {0, count}
local found, max = 0, tonumber(ARGV[8])
for k = 1, count do
  local i = list and (count - k + 1) or (2 * k - 1)
  local id = ids[i]
  local score = not list and tonumber(ids[i + 1]) or nil
  local h = redis.call("HMGET", ARGV[4] .. id, "msg", "state", "result", "pending_since", "asynqpy_error")
  h[6] = h[5]; h[5] = h[4]  -- h[5] pending_since, h[6] asynqpy_error, as holds() reads them
  local m = h[1] and message_fields(h[1]) or {}
  local ok = true
  for j = 9, #ARGV, 4 do
    if holds(ARGV[j], ARGV[j + 2], ARGV[j + 3], id, m, h, score, state, now) == (ARGV[j + 1] == "1") then ok = false break end
  end
  out[1] = k
  if ok and ARGV[7] == "count" then
    found = found + 1
  elseif ok then
    out[#out + 1] = k
    out[#out + 1] = id
    if ARGV[7] == "ids" then
      out[#out + 1] = h[1] and redis.sha1hex(h[1]) or ""
    else
      out[#out + 1] = list and 0 or ids[i + 1]
      for f = 1, 4 do out[#out + 1] = h[f] or 0 end
      out[#out + 1] = h[6] or 0
    end
    found = found + 1
    if max > 0 and found >= max then break end
  end
end
if ARGV[7] == "count" then out[3] = found end
return out
