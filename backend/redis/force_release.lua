-- force_release.lua: end the current tenure of a name, whoever holds it.
-- It runs after marks.lua (forceReleaseScript in scripts.go).
--
-- KEYS[1]  the lease hash (see acquire.lua)
-- KEYS[2]  the marks, KEYS[3] the lapses (see marks.lua)
-- ARGV[1]  the name
--
-- Returns {1, name, owner, token, pttl_ms, time_s, time_us, acquired_us}
-- describing the tenure it ended (as inspect.lua), {0} when there was none.
-- The token key is left alone, so the next tenure gets a larger token. Like
-- release.lua, it publishes '<token> <waiter>' (or '<token>' alone when no
-- mark is live) to the name's channel, <prefix>{<tag>}:free.

if redis.replicate_commands then redis.replicate_commands() end

local cur = redis.call('HMGET', KEYS[1], 'name', 'owner', 'token', 'acquired')
if not cur[1] then
  return {0}
end
if cur[1] ~= ARGV[1] then
  return redis.error_reply('ERR lease key ' .. KEYS[1] .. ' holds another name')
end
local now = redis.call('TIME')
local pttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
local msg = cur[3]
local first = marks_first(KEYS[2], KEYS[3])
if first then
  msg = msg .. ' ' .. first
end
redis.call('PUBLISH', string.sub(KEYS[1], 1, -7) .. ':free', msg)
return {1, cur[1], cur[2], cur[3], pttl, now[1], now[2], cur[4] or ''}
