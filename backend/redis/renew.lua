-- renew.lua: extend an intact tenure to now+ttl.
--
-- KEYS[1]  the lease hash (see acquire.lua)
-- ARGV[1]  the name, ARGV[2] the owner, ARGV[3] the token (decimal)
-- ARGV[4]  the ttl in whole milliseconds
--
-- Returns {1, time_s, time_us, acquired_us} when the tenure was intact
-- (same name, owner and token, not expired) and now ends at now+ttl
-- (acquired_us as in acquire.lua, '' when absent); {0} when it is lost,
-- changing nothing. An expired tenure is never revived: Redis has already
-- dropped its key by the time the script reads it.

if redis.replicate_commands then redis.replicate_commands() end

local cur = redis.call('HMGET', KEYS[1], 'name', 'owner', 'token', 'acquired')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or cur[3] ~= ARGV[3] then
  return {0}
end
local now = redis.call('TIME')
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {1, now[1], now[2], cur[4] or ''}
