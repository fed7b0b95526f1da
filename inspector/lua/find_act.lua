-- find_act: run, archive or delete the tasks a find matched, each only if it is still the task judged (its
-- message unchanged) and the action applies to its state now; one bounded batch per call.
-- KEYS[1] pending list   KEYS[2] archived sorted set   KEYS[3] our exact due times asynqpy:{q}:due
-- KEYS[4] the job's receipt asynqpy:{q}:jobstep:<job id>
-- ARGV[1] "run", "archive" or "delete"   ARGV[2] queue key prefix asynq:{q}:   ARGV[3] now (Unix ns)
-- ARGV[4] now (whole Unix s)   ARGV[5] archive age cutoff (Unix s)   ARGV[6] max archive size
-- ARGV[7] a tombstone value no task id has   ARGV[8] "tail" or "head": the end of the pending list nearer to
--   these tasks   ARGV[9] the step's sequence number   ARGV[10] the receipt's TTL (s)
-- ARGV[11] the step's memo (how far its scan went), answered back
-- ARGV[12..] two values per task: id, sha1 of its message as judged
-- ARGV[12..] after them, for pending tasks: their index in the pending list when judged (from the tail, -1 first)
-- A pending task leaves its list without one LREM walk each: its slot is overwritten with the tombstone (LSET,
-- found by index near where it was judged) and one LREM at the end removes every tombstone in a single walk
-- from the nearer end; a task that moved further since is removed by its own LREM.
-- Sent again with the same sequence number (its reply was lost), it answers the first reply and acts no more.
-- returns {changed, skipped, memo}
-- #include _detach.lua
-- #include _archive.lua
-- #include _receipt.lua
-- where id is now near index at (from the tail): workers popping the oldest since move it towards the tail,
-- a task pushed back at the tail moves it away; nil when it is not within the few hundred slots looked at
local function locate(key, at, id)
  if redis.call("LINDEX", key, at) == id then return at end
  local lo, hi = at - 64, math.min(-1, at + 448)
  local near = redis.call("LRANGE", key, lo, hi)
  local first = lo
  if -lo > redis.call("LLEN", key) then first = -redis.call("LLEN", key) end
  for j, v in ipairs(near) do
    if v == id then return first + j - 1 end
  end
  return nil
end

local replayed = replay_receipt(KEYS[4], ARGV[9])
if replayed then return replayed end
local act, prefix, tomb = ARGV[1], ARGV[2], ARGV[7]
local changed, skipped, tombs = 0, 0, 0
local n = (#ARGV - 11) / 3
for k = 1, n do
  local i = 10 + 2 * k
  local id = ARGV[i]
  local key = prefix .. "t:" .. id
  local msg, state, group, ukey = unpack(redis.call("HMGET", key, "msg", "state", "group", "unique_key"))
  if not state or not msg or redis.sha1hex(msg) ~= ARGV[i + 1] or state == "active"
      or (act == "run" and state == "pending") or (act == "archive" and state == "archived") then
    skipped = skipped + 1
  else
    if state == "pending" then
      local at = locate(KEYS[1], tonumber(ARGV[11 + 2 * n + k]), id)
      if at then
        redis.call("LSET", KEYS[1], at, tomb)
        tombs = tombs + 1
      else
        redis.call("LREM", KEYS[1], ARGV[8] == "tail" and -1 or 1, id)
      end
    else
      detach(prefix, KEYS[1], KEYS[3], id, state, group)
    end
    if act == "run" then
      redis.call("LPUSH", KEYS[1], id)
      redis.call("HSET", key, "state", "pending", "pending_since", ARGV[3])
    elseif act == "archive" then
      redis.call("ZADD", KEYS[2], ARGV[4], id)
      redis.call("HSET", key, "state", "archived")
      redis.call("HDEL", key, "pending_since")
    else
      if ukey and redis.call("GET", ukey) == id then redis.call("DEL", ukey) end
      redis.call("DEL", key)
    end
    changed = changed + 1
  end
end
if tombs > 0 then redis.call("LREM", KEYS[1], ARGV[8] == "tail" and -tombs or tombs, tomb) end
if act == "archive" and changed > 0 then trim_archive(KEYS[2], prefix .. "t:", ARGV[5], ARGV[6]) end
return keep_receipt(KEYS[4], ARGV[9], ARGV[10], {changed, skipped, ARGV[11]})
