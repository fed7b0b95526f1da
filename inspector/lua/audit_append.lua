-- Append one record to the audit stream if the chain's head is still the one the caller chained it to; a
-- checkpoint record also trims every record older than the first one it keeps, in the same step.
-- KEYS[1] the stream (asynqpy:{audit}), KEYS[2] the head (asynqpy:{audit}:head: mac, seq, id, keep_from, ckpt)
-- ARGV[1] the head MAC the record names as prev ("" for the first record), ARGV[2] the record (canonical JSON),
-- ARGV[3] its MAC, ARGV[4] its seq, ARGV[5] for a checkpoint: the stream id of the oldest record kept ("" for
-- any other record), ARGV[6] for a checkpoint: the seq of that record
-- Returns {1, stream id, stream length} when appended, {0, current head MAC} when another writer got there first.
-- No MAXLEN: nothing leaves the stream but through a checkpoint that names what left.
local head = redis.call('HGET', KEYS[2], 'mac') or ''
if head ~= ARGV[1] then
  return {0, head}
end
local id = redis.call('XADD', KEYS[1], '*', 'r', ARGV[2])
redis.call('HSET', KEYS[2], 'mac', ARGV[3], 'seq', ARGV[4], 'id', id)
if ARGV[5] ~= '' then
  redis.call('XTRIM', KEYS[1], 'MINID', ARGV[5])
  redis.call('HSET', KEYS[2], 'keep_from', ARGV[6], 'ckpt', id)
end
return {1, id, redis.call('XLEN', KEYS[1])}
