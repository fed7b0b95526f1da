-- _chunk.lua: a fragment (pasted at "-- #include _chunk.lua"): take up to n ids off a state's list or set.
-- From a list the oldest (the right end) go first; from a sorted set the lowest scores. The ids taken also
-- leave exact_key (our exact due times of scheduled and retry tasks; harmless for other states).
local function take_chunk(src, n, kind, exact_key)
  local ids
  if kind == "list" then
    ids = redis.call("LRANGE", src, -n, -1)
    redis.call("LTRIM", src, 0, -(#ids + 1))
  else
    ids = redis.call("ZRANGE", src, 0, n - 1)
    if #ids > 0 then
      redis.call("ZREMRANGEBYRANK", src, 0, #ids - 1)
      for _, id in ipairs(ids) do redis.call("ZREM", exact_key, id) end
    end
  end
  return ids
end
