-- _find_terms.lua: a fragment (pasted at "-- #include _find_terms.lua"): whether one cheap term of a query holds
-- for a task. m: its message's fields (_message.lua); h: its hash's msg, state, result, (4 unused),
-- pending_since (h[5]), asynqpy_error (h[6]); score: its sorted-set score (nil in a list). A value the task
-- lacks (no age, never failed) makes the term not hold.
local CMP = {[">"] = function(a, b) return a > b end, [">="] = function(a, b) return a >= b end,
  ["<"] = function(a, b) return a < b end, ["<="] = function(a, b) return a <= b end,
  ["="] = function(a, b) return a == b end}

local function holds(field, op, v, id, m, h, score, state, now)
  if field == "type" then return string.find(m[1] or "", v) ~= nil end
  if field == "id" then return string.find(id, v) ~= nil end
  if field == "text" then return string.find(string.lower(h[1] or ""), v, 1, true) ~= nil end
  if field == "error" then return string.find(string.lower((m[7] or "") .. "\0" .. (h[6] or "")), v, 1, true) ~= nil end
  local x
  if field == "retried" then x = m[6] or 0
  elseif field == "failed" then x = (m[11] or 0) > 0 and now - m[11] or nil
  elseif state == "pending" then x = tonumber(h[5] or "") and now - tonumber(h[5]) / 1e9
  elseif state == "archived" or state == "aggregating" then x = score and now - score
  elseif state == "completed" then x = (m[13] or 0) > 0 and now - m[13] or nil
  elseif state == "retry" then x = (m[11] or 0) > 0 and now - m[11] or nil end
  return x ~= nil and x ~= false and CMP[op](x, tonumber(v))
end
