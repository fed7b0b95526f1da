-- _done.lua: a fragment (pasted at "-- #include _done.lua", after _stats.lua and _finish.lua): one queue's part
-- of an acknowledgement, shared by done.lua (one queue) and done_queues.lua (several in one call).
-- done_tasks(active, lease, prefix, daily, total, first, last, expire_at, lost): the tasks named by
-- ARGV[first..last] (pairs: task id, unique-lock key ('' = none)) of the queue whose active list, lease set, task
-- key prefix and processed counters (the day's, all time) these are: each task still held by this worker leaves
-- active and the lease set, its hash and its uniqueness lock go; they are counted processed (one count per queue:
-- asynq's Done, batched). The ids no longer held (not in lease) are left alone and appended to lost.
local function done_tasks(active, lease, prefix, daily, total, first, last, expire_at, lost)
  local n = 0
  for i = first, last, 2 do
    local id = ARGV[i]
    if leave_active(active, lease, id, "") then
      redis.call("DEL", prefix .. id)
      release_unique(ARGV[i + 1], id)
      n = n + 1
    else
      lost[#lost + 1] = id
    end
  end
  count_processed(daily, total, n, expire_at)
end
