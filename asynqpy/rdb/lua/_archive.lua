-- _archive.lua: a fragment (pasted at "-- #include _archive.lua"): the archive's limits, as asynq keeps them.
-- Tasks archived at or before the age cutoff (now - 90 days) and all but the newest max_size go, and so do
-- their task hashes. Every script that archives (the worker's, the Inspector's) ends with this.
local function trim_archive(archived, task_prefix, cutoff, max_size)
  for _, id in ipairs(redis.call("ZRANGEBYSCORE", archived, "-inf", cutoff)) do
    redis.call("DEL", task_prefix .. id)
  end
  redis.call("ZREMRANGEBYSCORE", archived, "-inf", cutoff)
  local cap = -tonumber(max_size)
  for _, id in ipairs(redis.call("ZRANGE", archived, 0, cap)) do
    redis.call("DEL", task_prefix .. id)
  end
  redis.call("ZREMRANGEBYRANK", archived, 0, cap)
end
