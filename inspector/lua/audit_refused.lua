-- Count one refused or failed request in its window's aggregate (one per what, who and where), bounded.
-- KEYS[1] the window's hash (asynqpy:{audit}:refused:<window start>), KEYS[2] the index of windows (a zset)
-- ARGV[1] the aggregate's id, ARGV[2] its description (JSON), ARGV[3] now (Unix seconds), ARGV[4] at most
-- this many aggregates per window (the rest count in the "overflow" one), ARGV[5] seconds to keep a window,
-- ARGV[6] the window's start, ARGV[7] the overflow aggregate's description, ARGV[8] task ids (a JSON array)
-- ARGV[9] at most this many task ids kept per aggregate
-- Fields per aggregate <id>: the description; <id>:n the count; <id>:first, <id>:last the times; <id>:ids;
-- and :aggregates, how many the window holds.
-- Returns the aggregate's count after this one.
local id = ARGV[1]
if redis.call('HEXISTS', KEYS[1], id) == 0 then
  if tonumber(redis.call('HGET', KEYS[1], ':aggregates') or '0') >= tonumber(ARGV[4]) then
    id = 'overflow'
    redis.call('HSETNX', KEYS[1], id, ARGV[7])
  else
    redis.call('HSET', KEYS[1], id, ARGV[2])
    redis.call('HINCRBY', KEYS[1], ':aggregates', 1)
  end
  redis.call('HSETNX', KEYS[1], id .. ':first', ARGV[3])
end
local n = redis.call('HINCRBY', KEYS[1], id .. ':n', 1)
redis.call('HSET', KEYS[1], id .. ':last', ARGV[3])
if ARGV[8] ~= '[]' then
  local ids = cjson.decode(redis.call('HGET', KEYS[1], id .. ':ids') or '[]')
  for _, tid in ipairs(cjson.decode(ARGV[8])) do
    local known = false
    for _, have in ipairs(ids) do known = known or have == tid end
    if not known and #ids < tonumber(ARGV[9]) then table.insert(ids, tid) end
  end
  redis.call('HSET', KEYS[1], id .. ':ids', cjson.encode(ids))
end
redis.call('EXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[6], KEYS[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (tonumber(ARGV[6]) - tonumber(ARGV[5])))
return n
