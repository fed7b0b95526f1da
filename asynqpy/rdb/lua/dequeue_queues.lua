-- dequeue_queues: dequeue from several queues of one Redis node in one call: first each queue's share, in the
-- order given, then what is left of max from the queues in that order again (strict priority: all shares 0).
-- KEYS[4i-3..4i] queue i's pending, paused, active, lease (as dequeue.lua's KEYS); with a server id, n queues,
-- also KEYS[4n+i] its hand-off list of queue i and KEYS[5n+i] queue i's waiters: what was handed to it, in any
-- of them, comes first, and the slots of hand-offs its lanes took are left to them (see _dequeue.lua)
-- ARGV[1] lease expiry (Unix s)   ARGV[2] max tasks in all   ARGV[3] the fetching server's id ('' = none)
-- ARGV[4] "1" when its registration stood as far as it knows   then per queue i: ARGV[3+2i] its task key prefix,
-- ARGV[4+2i] its share
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
local nq = (#ARGV - 4) / 2
local me = ARGV[3] ~= "" and ARGV[3] or nil
for i = 1, nq do
  queues[i] = {pending = KEYS[4 * i - 3], paused = KEYS[4 * i - 2], active = KEYS[4 * i - 1], lease = KEYS[4 * i],
               prefix = ARGV[3 + 2 * i], box = me and KEYS[4 * nq + i], waiters = me and KEYS[5 * nq + i],
               me = me, offered = ARGV[4] == "1"}
end

local function emit(i, got, k)
  for j = 1, #got, 4 do
    out[#out + 1] = i
    for f = 0, 3 do
      out[#out + 1] = got[j + f]
    end
  end
  n = n + k
end

local function from(i, want)
  local got = {}
  local k, short = take(queues[i], want, ARGV[1], true, true, got)
  dry[i] = short
  emit(i, got, k)
end

-- what was handed to this server, in every queue, before any share: those tasks hold the slots it offered
for i = 1, #queues do
  local q = queues[i]
  if q.box and n < max then
    local got = {}
    local k, held = take_handed(q, max - n, ARGV[1], true, true, got)
    emit(i, got, k)
    max = max - held
  end
  q.box = nil
end
for i = 1, #queues do
  local share = math.min(tonumber(ARGV[4 + 2 * i]), max - n)
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
