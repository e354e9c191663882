-- marks.lua: the marks of the Lockers that wait for a name's turn
-- (driver.TurnWatcher). It only defines functions: its text comes first in
-- every script that reads or changes marks (scripts.go), and the KEYS
-- they are given are that script's.
--
-- A name's marks are two sorted sets in the slot of its other keys:
--
--   <base>:marks   waiter ID -> the server's TIME in microseconds when its
--                  mark was placed (see marks_place): its place in line
--   <base>:lapses  waiter ID -> the TIME in microseconds when it lapses
--
-- A mark is live until its lapse. Both keys expire (PEXPIRE) when the
-- last mark placed or renewed in them would lapse, and Redis deletes a
-- sorted set that loses its last member, so nothing outlives the marks.
-- Microseconds stay exact as sorted-set scores (doubles) until 2255;
-- numbers go to Redis through string.format, never tostring's 14 digits.

-- marks_now returns the server's TIME in microseconds.
local function marks_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- marks_drop_lapsed removes every mark that lapsed by now (microseconds).
local function marks_drop_lapsed(marks, lapses, now)
  local us = string.format('%.0f', now)
  local gone = redis.call('ZRANGEBYSCORE', lapses, '-inf', us)
  if #gone == 0 then
    return
  end
  for i = 1, #gone, 500 do
    redis.call('ZREM', marks, unpack(gone, i, math.min(i + 499, #gone)))
  end
  redis.call('ZREMRANGEBYSCORE', lapses, '-inf', us)
end

-- marks_first returns the waiter whose live mark was placed first, or
-- false when no mark is live, dropping the lapses by now (microseconds;
-- the server's TIME when nil) on the way. It is the one choice of the
-- line: the waiter a release wakes, StopWaiting passes the turn to, and
-- the fair policy lets take a free name (wait.lua). A name no one waits
-- for costs one EXISTS.
local function marks_first(marks, lapses, now)
  if redis.call('EXISTS', marks) == 0 then
    return false
  end
  marks_drop_lapsed(marks, lapses, now or marks_now())
  while true do
    local first = redis.call('ZRANGE', marks, 0, 0)
    if #first == 0 then
      return false
    end
    if redis.call('ZSCORE', lapses, first[1]) then
      return first[1]
    end
    -- A place without a lapse was not written by these scripts.
    redis.call('ZREM', marks, first[1])
  end
end

-- marks_place places waiter's mark at the back of the line: at now
-- (microseconds), or a microsecond after the last mark when that is not
-- below now (marks placed within one microsecond, or a clock stepped
-- back), so that the line keeps the order in which marks came.
local function marks_place(marks, waiter, now)
  local at = now
  local last = redis.call('ZRANGE', marks, -1, -1, 'WITHSCORES')
  if #last == 2 and tonumber(last[2]) >= at then
    at = tonumber(last[2]) + 1
  end
  redis.call('ZADD', marks, string.format('%.0f', at), waiter)
end

-- marks_keep_until makes both keys last at least ms milliseconds more:
-- the life of the mark just placed or renewed.
local function marks_keep_until(marks, lapses, ms)
  for _, k in ipairs({marks, lapses}) do
    if redis.call('PTTL', k) < tonumber(ms) then
      redis.call('PEXPIRE', k, ms)
    end
  end
end
