-- _finish.lua: a fragment (pasted at "-- #include _finish.lua"): an active task leaves the worker that held it.
-- leave_active: only while the task is held (in the lease set, and with a cutoff only when its lease ended
-- at or before it: the recoverer's check), it leaves the lease set and the active list. Returns true if so.
-- release_unique: the uniqueness lock goes, if this task still holds it.
local function leave_active(active, lease, id, cutoff)
  if cutoff ~= "" then
    local score = redis.call("ZSCORE", lease, id)
    if not score or tonumber(score) > tonumber(cutoff) then
      return false
    end
  end
  if redis.call("ZREM", lease, id) == 0 then
    return false
  end
  redis.call("LREM", active, 0, id)
  return true
end

local function release_unique(ukey, id)
  if ukey ~= "" and redis.call("GET", ukey) == id then
    redis.call("DEL", ukey)
  end
end
