-- release.lua: end an intact tenure.
--
-- KEYS[1]  the lease hash (see acquire.lua)
-- ARGV[1]  the name, ARGV[2] the owner, ARGV[3] the token (decimal)
--
-- Returns 1 when the tenure was intact and is now ended, 0 when it had
-- expired, was released or taken over (nothing is changed). The token
-- counter is kept, so the next tenure gets a larger token.

local cur = redis.call('HMGET', KEYS[1], 'name', 'owner', 'token')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or cur[3] ~= ARGV[3] then
  return 0
end
redis.call('DEL', KEYS[1])
return 1
