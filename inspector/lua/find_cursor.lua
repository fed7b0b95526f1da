-- find_cursor: record where a find job's scan goes on (never bringing back a job that expired meanwhile).
-- KEYS[1] the job's hash   ARGV[1] the cursor
-- returns 1 recorded, 0 no such job
if redis.call("EXISTS", KEYS[1]) == 0 then return 0 end
redis.call("HSET", KEYS[1], "cursor", ARGV[1])
return 1
