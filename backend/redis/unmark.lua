-- unmark.lua: take a waiter's mark away (StopWaiting), after marks.lua.
--
-- KEYS[1]  the lease hash (see acquire.lua): <base>:lease, whose base also
--          names the pub/sub channel <base>:free (see watch.go)
-- KEYS[2]  the marks, KEYS[3] the lapses (see marks.lua)
-- ARGV[1]  the waiter ID
--
-- Lapsed marks are dropped too. When the waiter's live mark was first in
-- line and the name is free, a release most likely chose this waiter,
-- which gives up instead of acquiring: the turn passes on, as a release
-- would pass it, with the message 'passed <next waiter>' ('passed' alone
-- when no live mark is left). Returns 1 when the waiter had a live mark,
-- 0 otherwise.

if redis.replicate_commands then redis.replicate_commands() end

if redis.call('EXISTS', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[3], ARGV[1])
  return 0
end
local was = marks_first(KEYS[2], KEYS[3])
redis.call('ZREM', KEYS[3], ARGV[1])
if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then
  return 0
end
if was == ARGV[1] and redis.call('EXISTS', KEYS[1]) == 0 then
  local msg = 'passed'
  local after = marks_first(KEYS[2], KEYS[3])
  if after then
    msg = msg .. ' ' .. after
  end
  redis.call('PUBLISH', string.sub(KEYS[1], 1, -7) .. ':free', msg)
end
return 1
