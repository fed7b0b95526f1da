-- dequeue_queues: dequeue from several queues of one Redis node in one call: first each queue's share, in the
-- order given, then what is left of max from the queues in that order again (strict priority: all shares 0).
-- ARGV[1] lease expiry (Unix s)   ARGV[2] max tasks in all   then per queue i: ARGV[1+2i] its key prefix
-- ("asynq:{q}:", rdb/keys.py queue_prefix), ARGV[2+2i] its share
-- No KEYS: each queue's keys are its prefix and their asynq names (pending, paused, active, lease, t:<id>), as
-- rdb/keys.py writes them; a fetch over 100 queues names each once, not four keys and a prefix.
-- returns a flat list of (queue index 1.., id, msg, pending_since ns string or '', the limit the task waited on
-- or '') quintuples. The steps of one queue, limits included, are take() in _dequeue.lua; every key of a queue
-- shares its hash tag and the queues differ, so this runs only where all the queues live on one node (not on a
-- cluster).
-- #include _clock.lua
-- #include _limits.lua
-- #include _dequeue.lua
local max = tonumber(ARGV[2])
local out, n = {}, 0
local queues, dry = {}, {}
local flags, lps = {}, {}  -- every queue's paused, limits and limit waits keys; its limits prefix
for i = 1, (#ARGV - 2) / 2 do
  local p = ARGV[1 + 2 * i]
  local q = {pending = p .. "pending", paused = p .. "paused", active = p .. "active", lease = p .. "lease",
             prefix = p .. "t:"}
  queues[i] = q
  local lp = limits_prefix_of(q.pending)
  lps[i] = lp
  flags[#flags + 1] = q.paused
  flags[#flags + 1] = lp .. "limits"
  flags[#flags + 1] = lp .. "lwaiting"
end

-- The common case (no queue paused or limited) is one EXISTS for all of them (in chunks: unpack's bound), not
-- one per queue; otherwise take() asks each queue's own.
local function none_flagged()
  for s = 1, #flags, 600 do
    if redis.call("EXISTS", unpack(flags, s, math.min(s + 599, #flags))) > 0 then
      return false
    end
  end
  return true
end

if #queues > 1 and none_flagged() then
  for i, q in ipairs(queues) do
    q.open = true
    loaded[lps[i]] = false
  end
end

local function from(i, want)
  local k, short = take(queues[i], want, ARGV[1], true, true, i, out)
  dry[i] = short
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
