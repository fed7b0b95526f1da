-- done_queues: done.lua for the finished tasks of several queues of one Redis node, in one call.
-- KEYS[4i-3..4i] queue i's active, lease, processed:<utc day>, processed (all time) (as done.lua's KEYS)
-- ARGV[1] stats expiry (Unix s)   then per queue: its task key prefix, the number k of its tasks, and k pairs:
-- task id, unique-lock key ('' = none)
-- returns the ids no longer held by this worker (not in lease), which were left alone
-- #include _stats.lua
-- #include _finish.lua
local lost = {}
local a = 2
for q = 1, #KEYS / 4 do
  local active, lease, prefix, k = KEYS[4 * q - 3], KEYS[4 * q - 2], ARGV[a], tonumber(ARGV[a + 1])
  local n = 0
  for i = a + 2, a + 2 * k, 2 do
    local id = ARGV[i]
    if leave_active(active, lease, id, "") then
      redis.call("DEL", prefix .. id)
      release_unique(ARGV[i + 1], id)
      n = n + 1
    else
      lost[#lost + 1] = id
    end
  end
  count_processed(KEYS[4 * q - 1], KEYS[4 * q], n, ARGV[1])
  a = a + 2 + 2 * k
end
return lost
