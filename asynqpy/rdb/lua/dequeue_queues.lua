-- dequeue_queues: dequeue from several queues of one Redis node in one call: first each queue's share, in the
-- order given, then what is left of max from the queues in that order again (strict priority: all shares 0).
-- KEYS[4i-3..4i] queue i's pending, paused, active, lease (as dequeue.lua's KEYS)
-- ARGV[1] lease expiry (Unix s)   ARGV[2] max tasks in all   then per queue i: ARGV[1+2i] its task key prefix,
-- ARGV[2+2i] its share
-- returns a flat list of (queue index 1.., id, msg, pending_since ns string or '', the limit the task waited on
-- or '') quintuples. The steps of one
-- queue, limits included, are take() in _dequeue.lua; every key of a queue shares its hash tag, so this runs only
-- where all the queues live on one node (not on a cluster).
-- #include _clock.lua
-- #include _limits.lua
-- #include _dequeue.lua
local max = tonumber(ARGV[2])
local out, n = {}, 0
local queues, dry = {}, {}
for i = 1, #KEYS / 4 do
  queues[i] = {pending = KEYS[4 * i - 3], paused = KEYS[4 * i - 2], active = KEYS[4 * i - 1], lease = KEYS[4 * i],
               prefix = ARGV[1 + 2 * i]}
end

local function from(i, want)
  local got = {}
  local k, short = take(queues[i], want, ARGV[1], true, true, got)
  dry[i] = short
  for j = 1, #got, 4 do
    out[#out + 1] = i
    for f = 0, 3 do
      out[#out + 1] = got[j + f]
    end
  end
  n = n + k
end

for i = 1, #queues do
  local share = math.min(tonumber(ARGV[2 + 2 * i]), max - n)
  if share > 0 then
    from(i, share)
  end
end
for i = 1, #queues do
  if n >= max then
    break
  end
  if not dry[i] then
    from(i, max - n)
  end
end
return out
