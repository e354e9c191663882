-- acquire.lua: start a tenure of a name, or extend the caller's own.
--
-- KEYS[1]  the lease hash: fields name, owner, token, acquired (the server's
--          TIME in microseconds when the tenure began; absent in hashes
--          written by versions before it); it expires by PEXPIRE
-- KEYS[2]  the name's token counter: a plain integer that never expires
-- ARGV[1]  the name (stored in full, checked against the hash)
-- ARGV[2]  the owner
-- ARGV[3]  the ttl in whole milliseconds (the client rounds up)
--
-- Returns {1, token, time_s, time_us, acquired_us} when the caller holds
-- the name now: a new tenure, or the caller's own unexpired one
-- (re-entrancy: same token and acquired_us, expiry moved to now+ttl);
-- acquired_us is '' for a hash without the field. Returns {0, holder,
-- pttl_ms, time_s, time_us} when another owner holds it. time_s and
-- time_us are the server's TIME.

-- Redis 3.2/4 need effects replication for a write after TIME; later
-- versions always replicate effects and ignore this.
if redis.replicate_commands then redis.replicate_commands() end

local now = redis.call('TIME')
local cur = redis.call('HMGET', KEYS[1], 'name', 'owner', 'token', 'acquired')

if cur[1] then
  if cur[1] ~= ARGV[1] then
    return redis.error_reply('ERR lease key ' .. KEYS[1] .. ' holds another name')
  end
  if cur[2] ~= ARGV[2] then
    return {0, cur[2], redis.call('PTTL', KEYS[1]), now[1], now[2]}
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {1, cur[3], now[1], now[2], cur[4] or ''}
end

-- A new tenure. The token is the counter plus one, but never below the
-- server's clock in microseconds: if the counter was lost (a restart
-- without persistence, FLUSHALL, a failover to a replica that missed the
-- write), the clock still puts the token above every earlier one.
-- Microseconds since 1970 stay below 2^53 (exact in a Lua double) until
-- the year 2255.
local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
local token = redis.call('INCR', KEYS[2])
if token < floor then
  token = floor
  redis.call('SET', KEYS[2], string.format('%.0f', token))
end
token = string.format('%.0f', token)

local acquired = string.format('%.0f', floor)
redis.call('HSET', KEYS[1], 'name', ARGV[1], 'owner', ARGV[2], 'token', token, 'acquired', acquired)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, token, now[1], now[2], acquired}
