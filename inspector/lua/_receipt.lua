-- _receipt.lua: a fragment (pasted at "-- #include _receipt.lua"): the receipt of a background job's chunk, kept in
-- the queue's own slot (asynqpy:{q}:jobstep:<job id>), so the chunk's script writes it on a cluster too. A chunk sent
-- again with the same sequence number (its reply was lost) is answered from the receipt and acts no more.
-- key is nil for a chunk of no job: then nothing is looked up or kept.

-- the reply kept for chunk seq ({a, b} or {a, b, memo}), or nil when seq is not the chunk the receipt is of
local function replay_receipt(key, seq)
  if not key then return nil end
  local got = redis.call("HMGET", key, "seq", "a", "b", "memo")
  if got[1] ~= seq then return nil end
  local reply = {tonumber(got[2]), tonumber(got[3])}
  if got[4] and got[4] ~= "" then reply[3] = got[4] end
  return reply
end

-- keep reply as chunk seq's (replacing the previous chunk's), for ttl seconds; returns reply
local function keep_receipt(key, seq, ttl, reply)
  if key then
    redis.call("HSET", key, "seq", seq, "a", reply[1], "b", reply[2], "memo", reply[3] or "")
    redis.call("EXPIRE", key, ttl)
  end
  return reply
end
