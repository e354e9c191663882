-- wait.lua: the waiter's mark for AcquireOrWait. It runs as the head of
-- one script, after marks.lua and before acquire.lua's text (waitScript in
-- scripts.go), so that the mark and the acquire attempt are one round
-- trip; acquire.lua then answers as Acquire would.
--
-- KEYS[1], KEYS[2], ARGV[1..3] as in acquire.lua
-- KEYS[3]  the marks, KEYS[4] the lapses (see marks.lua)
-- ARGV[4]  the waiter ID
-- ARGV[5]  how long the mark lasts from now, in whole milliseconds (> 0)
-- ARGV[6]  '1' to place the mark at the back anew when the caller
--          acquires (or re-enters), '0' to remove it then
--
-- Lapsed marks are dropped first. When another owner holds the name, the
-- waiter's mark is placed at the back if it has no live one, and lapses
-- ARGV[5] from now either way; otherwise (acquire.lua will start or extend
-- the caller's tenure) it is removed, or placed at the back anew with
-- ARGV[6]. A lease hash of another name is left to acquire.lua's error.

if redis.replicate_commands then redis.replicate_commands() end

local wnow = marks_now()
marks_drop_lapsed(KEYS[3], KEYS[4], wnow)
local wcur = redis.call('HMGET', KEYS[1], 'name', 'owner')
if not wcur[1] or wcur[1] == ARGV[1] then
  local busy = wcur[1] and wcur[2] ~= ARGV[2]
  if busy or ARGV[6] == '1' then
    if not busy or not redis.call('ZSCORE', KEYS[3], ARGV[4]) then
      marks_place(KEYS[3], ARGV[4], wnow)
    end
    redis.call('ZADD', KEYS[4], string.format('%.0f', wnow + tonumber(ARGV[5]) * 1000), ARGV[4])
    marks_keep_until(KEYS[3], KEYS[4], ARGV[5])
  else
    redis.call('ZREM', KEYS[3], ARGV[4])
    redis.call('ZREM', KEYS[4], ARGV[4])
  end
end
-- acquire.lua follows.
