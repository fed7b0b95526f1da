-- clear_server_state: a stopping server removes its info and workers keys.
-- KEYS[1] asynq:servers:{host:pid:id}   KEYS[2] asynq:workers:{host:pid:id}
-- returns 1
redis.call("DEL", KEYS[1], KEYS[2])
return 1
