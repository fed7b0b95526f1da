-- session_end_user: end every session of one user (a password change, a removal) and bump the sessions epoch.
-- KEYS[1] the sessions epoch   KEYS[2] the user's set of sessions   KEYS[3..] the sessions' hashes (its members)
-- returns how many sessions were live
local n = 0
for i = 3, #KEYS do
  n = n + redis.call("DEL", KEYS[i])
end
redis.call("DEL", KEYS[2])
redis.call("INCR", KEYS[1])
return n
