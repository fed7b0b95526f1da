-- _new_task.lua: a fragment (pasted at "-- #include _new_task.lua", after _room.lua and _handoff.lua): the checks
-- of a task about to be stored, shared by enqueue.lua and enqueue_unique.lua.
-- new_task_checks(pending, paused, key, now_ms, room) returns three answers: whether the queue is plain (see
-- plain_queue); the refusal of its backpressure limit ("full:...", asked only when room is true) or false; whether
-- a task has that key already. The common case (a plain queue, a new key) is one EXISTS. Otherwise each check is
-- asked on its own, in asynq's order: the limit, then the key (enqueue_unique takes its lock between the two).
local function new_task_checks(pending, paused, key, now_ms, room)
  if plain_queue(pending, paused, key) then
    return true, false, false
  end
  local plain = plain_queue(pending, paused)
  local full = not plain and room and refusal(string.sub(pending, 1, -8), now_ms, 0)
  if full then
    return plain, full, false
  end
  return plain, false, plain or redis.call("EXISTS", key) == 1  -- (plain: the task's key is the one that exists)
end
