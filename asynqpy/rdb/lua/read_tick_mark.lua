-- read_tick_mark: the latest tick of a scheduler entry that any replica claimed.
-- KEYS[1] asynqpy:{q}:lasttick:<entry id>
-- returns the tick (Unix s) or false
return redis.call("GET", KEYS[1])
