-- acquire.lua: start a tenure of a name, or extend the caller's own.
--
-- KEYS[1]  the lease hash: fields name, owner, token, acquired (the server's
--          TIME in microseconds when the tenure began; absent in hashes
--          written by versions before it); it expires by PEXPIRE
-- KEYS[2]  the name's token memory: the last token, a plain integer that
--          expires TOKEN_MEMORY_MS after the server's clock passes it
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

-- A new tenure. Its token is the server's clock in microseconds, or one
-- more than the name's last token when that is not below the clock (more
-- than one tenure in a microsecond, or a clock stepped back). The last
-- token is kept in KEYS[2], which expires TOKEN_MEMORY_MS after the
-- instant the clock passes it: until then it keeps tokens growing across a
-- clock stepped back by up to that much; after that, a token taken from
-- the clock is already above it (and the key was only needed while the
-- clock might still read below it; see "Tokens" in doc.go). Losing the key
-- early (FLUSHALL, a restart without persistence, a failover to a replica
-- that missed the write) leaves the clock floor, which is above every
-- token issued before by a clock that was not ahead of this one.
-- Microseconds since 1970 stay below 2^53 (exact in a Lua double) until
-- the year 2255.
local TOKEN_MEMORY_MS = 600000
local floor = tonumber(now[1]) * 1000000 + tonumber(now[2])
local token = floor
-- One write in the common case: store the clock's token, and read the one
-- it replaces (SET ... GET, Redis 6.2 and later); an older server answers
-- with an error, and then it is GET and SET.
local prev = redis.pcall('SET', KEYS[2], string.format('%.0f', floor), 'PX', TOKEN_MEMORY_MS, 'GET')
local stored = true
if type(prev) == 'table' then
  prev = redis.call('GET', KEYS[2])
  stored = false
end
-- A value that is not a number (written by something else) counts as a
-- lost key: the clock floor still holds, and the value is replaced.
local last = tonumber(prev)
if last and last >= token then
  token = last + 1
  stored = false
end
token = string.format('%.0f', token)
if not stored then
  -- The key expires TOKEN_MEMORY_MS after the clock passes the token.
  redis.call('SET', KEYS[2], token, 'PX', TOKEN_MEMORY_MS + math.ceil((tonumber(token) - floor) / 1000) + 1)
end

local acquired = string.format('%.0f', floor)
redis.call('HSET', KEYS[1], 'name', ARGV[1], 'owner', ARGV[2], 'token', token, 'acquired', acquired)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, token, now[1], now[2], acquired}
