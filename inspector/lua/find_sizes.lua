-- find_sizes: the sizes of a queue's states and aggregation groups, for a find to say how far it scanned.
-- KEYS[1..6] pending, active, scheduled, retry, archived, completed   KEYS[7] the groups set
-- ARGV[1] group key prefix asynq:{q}:g:
-- returns {six sizes, then per group (sorted by name): name, size}
local out = {redis.call("LLEN", KEYS[1]), redis.call("LLEN", KEYS[2])}
for i = 3, 6 do out[#out + 1] = redis.call("ZCARD", KEYS[i]) end
local groups = redis.call("SMEMBERS", KEYS[7])
table.sort(groups)
for _, g in ipairs(groups) do
  out[#out + 1] = g
  out[#out + 1] = redis.call("ZCARD", ARGV[1] .. g)
end
return out
