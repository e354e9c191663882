-- wait.lua: the waiter's mark for AcquireOrWait, and the fair policy. It
-- runs as the head of one script, after marks.lua and before acquire.lua's
-- text (waitScript in scripts.go), so that the mark and the acquire
-- attempt are one round trip; acquire.lua then answers as Acquire would.
--
-- KEYS[1], KEYS[2], ARGV[1..3] as in acquire.lua
-- KEYS[3]  the marks, KEYS[4] the lapses (see marks.lua)
-- ARGV[4]  the waiter ID
-- ARGV[5]  how long the mark lasts from now, in whole milliseconds (> 0)
-- ARGV[6]  '1' to place the mark at the back anew when the caller
--          acquires (or re-enters), '0' to remove it then
-- ARGV[7]  '1' for the fair policy: take a free name only when the
--          waiter's mark is the first live one, or no mark is live
--
-- Lapsed marks are dropped first. The waiter must wait when another owner
-- holds the name, or, with ARGV[7], when the name is free but another
-- waiter's live mark is first (marks_first: the mark a release would
-- choose now); it then has its mark placed at the back if it has no live
-- one, lapsing ARGV[5] from now either way. Otherwise (acquire.lua will
-- start or extend the caller's tenure) the mark is removed, or placed at
-- the back anew with ARGV[6]. When the waiter must wait for a free name,
-- the script returns {0, '', left_ms, time_s, time_us}: no holder, and
-- the time the first mark has left. A lease hash of another name is left
-- to acquire.lua's error.

if redis.replicate_commands then redis.replicate_commands() end

local wnow = marks_now()
marks_drop_lapsed(KEYS[3], KEYS[4], wnow)
local wcur = redis.call('HMGET', KEYS[1], 'name', 'owner')
if not wcur[1] or wcur[1] == ARGV[1] then
  local busy = wcur[1] and wcur[2] ~= ARGV[2]
  local first = not wcur[1] and ARGV[7] == '1' and marks_first(KEYS[3], KEYS[4], wnow)
  local behind = first and first ~= ARGV[4]
  if busy or behind or ARGV[6] == '1' then
    if not (busy or behind) or not redis.call('ZSCORE', KEYS[3], ARGV[4]) then
      marks_place(KEYS[3], ARGV[4], wnow)
    end
    redis.call('ZADD', KEYS[4], string.format('%.0f', wnow + tonumber(ARGV[5]) * 1000), ARGV[4])
    marks_keep_until(KEYS[3], KEYS[4], ARGV[5])
  else
    redis.call('ZREM', KEYS[3], ARGV[4])
    redis.call('ZREM', KEYS[4], ARGV[4])
  end
  if behind then
    local left = tonumber(redis.call('ZSCORE', KEYS[4], first)) - wnow
    return {0, '', math.ceil(left / 1000), string.format('%.0f', math.floor(wnow / 1000000)), string.format('%.0f', wnow % 1000000)}
  end
end
-- acquire.lua follows.
