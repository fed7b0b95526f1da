-- clear_server_health: a stopping server deletes its health note.
-- KEYS[1] asynqpy:health:{host:pid:id}
-- returns 1 when it existed
return redis.call("DEL", KEYS[1])
