-- _detach.lua: a fragment (pasted at "-- #include _detach.lua"): take a task out of the list or set of its state.
-- A pending task leaves the pending list, an aggregating one its group (and the group leaves the groups set
-- when it empties), any other one the sorted set named after its state (and a scheduled or retry one our
-- exact due times, exact_key).
local function detach(prefix, pending, exact_key, id, state, group)
  if state == "pending" then
    redis.call("LREM", pending, 1, id)
  elseif state == "aggregating" then
    if group then
      local gkey = prefix .. "g:" .. group
      redis.call("ZREM", gkey, id)
      if redis.call("EXISTS", gkey) == 0 then
        redis.call("SREM", prefix .. "groups", group)
      end
    end
  else
    redis.call("ZREM", prefix .. state, id)
    if state == "scheduled" or state == "retry" then
      redis.call("ZREM", exact_key, id)
    end
  end
end
