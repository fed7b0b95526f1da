-- write_server_health: our own note beside asynq's server info: ok or degraded, and since when.
-- KEYS[1] asynqpy:health:{host:pid:id}
-- ARGV[1] ttl (s)   ARGV[2] status ("ok" or "degraded: ...")   ARGV[3] kind ("" when ok)   ARGV[4] since (Unix s)
-- ARGV[5] clock offset: Redis's clock minus the server's (s), as its heartbeat measured it ('' = not yet)
-- ARGV[6] stuck_threads: handler threads still running after their tasks were given up
-- returns 1
redis.call("DEL", KEYS[1])
redis.call("HSET", KEYS[1], "status", ARGV[2], "kind", ARGV[3], "since", ARGV[4], "stuck_threads", ARGV[6])
if ARGV[5] ~= "" then
  redis.call("HSET", KEYS[1], "clock_offset", ARGV[5])
end
redis.call("EXPIRE", KEYS[1], ARGV[1])
return 1
