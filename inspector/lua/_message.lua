-- _message.lua: a fragment (pasted at "-- #include _message.lua"): the few fields of an asynq TaskMessage
-- (protobuf) the find script judges: type (1), id (3), retried (6), error_msg (7), last_failed_at (11),
-- completed_at (13). Returns nil for bytes that are not a message.
local function varint(s, i)
  local v, m = 0, 1
  while true do
    local b = string.byte(s, i)
    if not b then return nil, i end
    i = i + 1
    v = v + (b % 128) * m
    if b < 128 then return v, i end
    m = m * 128
  end
end

local WANTED = {[1] = true, [3] = true, [7] = true}
local function message_fields(s)
  local f, i, n = {}, 1, #s
  while i <= n do
    local key, len
    key, i = varint(s, i)
    if not key then return nil end
    local num, wire = math.floor(key / 8), key % 8
    if wire == 0 then
      f[num], i = varint(s, i)
      if not f[num] then return nil end
    elseif wire == 2 then
      len, i = varint(s, i)
      if not len or i + len - 1 > n then return nil end
      if WANTED[num] then f[num] = string.sub(s, i, i + len - 1) end
      i = i + len
    elseif wire == 1 then i = i + 8
    elseif wire == 5 then i = i + 4
    else return nil end
  end
  return f
end
