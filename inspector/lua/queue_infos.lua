-- queue_infos: the info of several queues in one step (read only), each as _queue_info.lua's queue_info.
-- KEYS: per queue its 13 keys, in _queue_info.lua's order (on a cluster: queues of one slot only)
-- ARGV[1] memory sample size   ARGV[2] retry sample size, then per queue 4: task key prefix, group key
--   prefix, 1 to sample its memory (else 0), its fingerprint ('': read it in full)
-- returns per queue, in order: 0 when its fingerprint still holds, else its info (see _queue_info.lua)
-- #include _due.lua
-- #include _queue_info.lua
local n, retry_n = tonumber(ARGV[1]), tonumber(ARGV[2])
local out = {}
for i = 0, #KEYS / 13 - 1 do
  local a = 2 + i * 4
  out[i + 1] = queue_info({unpack(KEYS, i * 13 + 1, i * 13 + 13)}, ARGV[a + 1], ARGV[a + 2],
    ARGV[a + 3] == "1" and n or 0, retry_n, ARGV[a + 4])
end
return out
