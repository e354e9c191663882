-- fence.lua: check and raise a lease name's fence, and make the guarded
-- writes, in one step.
--
-- KEYS[1]     the fence key: the largest token accepted for the name on
--             this hash tag, a decimal string; it never expires
-- KEYS[2..]   the key of each guarded command, in order; all share
--             KEYS[1]'s hash tag, so one Redis Cluster node has them all
-- ARGV[1]     the token: 1 to 19 decimal digits, no leading zero
-- ARGV[2..]   for each command: its name (from the client's allow-list),
--             its argument count c, then its c arguments after the key
--
-- Returns {0, max} when the token is smaller than the stored maximum max:
-- nothing was changed. Returns {1, reply...} when it is accepted: each
-- command ran, in order, then the maximum was raised to the token (or
-- left alone when equal). A command that fails (WRONGTYPE, say) ends the
-- script with its error; the commands before it stay applied, as in
-- MULTI/EXEC, and the maximum is not raised.

-- Tokens are compared as decimal strings: by length, then digit by digit.
-- That is exact for every token, where a Lua number (a double) is exact
-- only below 2^53, and it does not depend on the server's locale.
local function less(a, b)
  if #a ~= #b then return #a < #b end
  for i = 1, #a do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return false
end

local token = ARGV[1]
local max = redis.call('GET', KEYS[1])
if max and less(token, max) then
  return {0, max}
end

local replies = {1}
local i = 2
for k = 2, #KEYS do
  local argc = tonumber(ARGV[i + 1])
  replies[k] = redis.call(ARGV[i], KEYS[k], unpack(ARGV, i + 2, i + 1 + argc))
  i = i + 2 + argc
end

if max ~= token then
  redis.call('SET', KEYS[1], token)
end
return replies
