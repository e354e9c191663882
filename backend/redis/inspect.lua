-- inspect.lua: read the current tenure of a name.
--
-- KEYS[1]  the lease hash (see acquire.lua)
-- ARGV[1]  the name, or '' to accept whatever name the hash holds (List)
--
-- Returns {1, name, owner, token, pttl_ms, time_s, time_us, acquired_us}
-- for an unexpired tenure (acquired_us as in acquire.lua, '' when absent),
-- {0} when there is none.

local cur = redis.call('HMGET', KEYS[1], 'name', 'owner', 'token', 'acquired')
if not cur[1] then
  return {0}
end
if ARGV[1] ~= '' and cur[1] ~= ARGV[1] then
  return redis.error_reply('ERR lease key ' .. KEYS[1] .. ' holds another name')
end
local now = redis.call('TIME')
return {1, cur[1], cur[2], cur[3], redis.call('PTTL', KEYS[1]), now[1], now[2], cur[4] or ''}
