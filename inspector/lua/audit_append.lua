-- Append one record to the audit stream if the chain's head is still the one the caller hashed against.
-- KEYS[1] the stream (asynqpy:audit), KEYS[2] the head hash (asynqpy:audit:head: hash, seq, id)
-- ARGV[1] the head hash the record names as prev ("" for the first record), ARGV[2] the stream's cap,
-- ARGV[3] the record (canonical JSON), ARGV[4] its hash, ARGV[5] its seq
-- Returns {1, stream id} when appended, {0, current head hash} when another writer got there first.
local head = redis.call('HGET', KEYS[2], 'hash') or ''
if head ~= ARGV[1] then
  return {0, head}
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[2], '*', 'r', ARGV[3])
redis.call('HSET', KEYS[2], 'hash', ARGV[4], 'seq', ARGV[5], 'id', id)
return {1, id}
