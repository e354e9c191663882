-- queue.lua: the waiting line of a name, for AcquireQueued. It runs as the
-- head of one script with acquire.lua's text after it (fairScript in
-- scripts.go): it returns early when the caller must wait, and otherwise
-- takes the caller out of the line and lets acquire.lua start or extend
-- the tenure, all in one round trip.
--
-- KEYS[1], KEYS[2], ARGV[1..3] as in acquire.lua
-- KEYS[3]  the line: a sorted set of waiting owners, scored by the
--          server's TIME in microseconds when each joined
-- KEYS[4]  the places: a hash owner -> the TIME in microseconds when
--          that owner's place lapses
-- ARGV[4]  how long the caller's place lasts from now, in whole ms
--
-- Lapsed places are dropped first. The caller joins at the back unless it
-- has a place, and its place lasts ARGV[4] from now either way. Returns
-- {0, first, left_ms, time_s, time_us} when the name is free but another
-- owner is first in line (left_ms: what that owner's place has left);
-- when another owner holds the name, acquire.lua answers that it is held.
-- Both keys expire when the last place in them would lapse.

if redis.replicate_commands then redis.replicate_commands() end

local qnow = redis.call('TIME')
local qus = tonumber(qnow[1]) * 1000000 + tonumber(qnow[2])
local first, firstLapse, placed = nil, 0, false
for _, m in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  local lapse = tonumber(redis.call('HGET', KEYS[4], m) or '0')
  if lapse <= qus then
    redis.call('ZREM', KEYS[3], m)
    redis.call('HDEL', KEYS[4], m)
  else
    if not first then first, firstLapse = m, lapse end
    if m == ARGV[2] then placed = true end
  end
end
local mine = qus + tonumber(ARGV[4]) * 1000
if not placed then
  redis.call('ZADD', KEYS[3], string.format('%.0f', qus), ARGV[2])
end
redis.call('HSET', KEYS[4], ARGV[2], string.format('%.0f', mine))
if not first or first == ARGV[2] then first, firstLapse = ARGV[2], mine end
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[4]) then
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
end

local holder = redis.call('HGET', KEYS[1], 'owner')
if not holder and first ~= ARGV[2] then
  return {0, first, math.ceil((firstLapse - qus) / 1000), qnow[1], qnow[2]}
end
if not holder or holder == ARGV[2] then
  -- acquire.lua below starts or extends the caller's tenure.
  redis.call('ZREM', KEYS[3], ARGV[2])
  redis.call('HDEL', KEYS[4], ARGV[2])
end
-- acquire.lua follows.
