-- release.lua: end an intact tenure, recognising a resend of the same call,
-- and tell the name's watchers whose turn it is. It runs after marks.lua
-- (releaseScript in scripts.go).
--
-- KEYS[1]  the lease hash (see acquire.lua)
-- KEYS[2]  the release marker of this tenure: <prefix>{<tag>}:released:<token>
-- KEYS[3]  the marks, KEYS[4] the lapses (see marks.lua)
-- ARGV[1]  the name, ARGV[2] the owner, ARGV[3] the token (decimal)
-- ARGV[4]  the nonce of this Release call (unique, one per call)
-- ARGV[5]  how long the marker lasts, in milliseconds
--
-- Returns 1 when the tenure was intact and is now ended, and also when this
-- very call (same nonce) ended it before: go-redis resends a request whose
-- reply was lost, and the resend must report the release its first attempt
-- made. Returns 0 when the tenure had expired, was released by another call
-- or taken over (nothing is changed). The token key is left alone, so the
-- next tenure gets a larger token; no other script reads the marker, so the
-- name is free at once.
--
-- When it ends the tenure it publishes to the name's channel,
-- <prefix>{<tag>}:free (KEYS[1] with ":lease" replaced by ":free"), for
-- the Watches waiting for the name: '<token> <waiter>', where waiter is the
-- ID of the live mark placed first (lapsed marks are dropped on the way),
-- or '<token>' alone when no mark is live. A version before marks
-- published '<token>' alone, which every Watch takes as a release that
-- chose no one.

if redis.replicate_commands then redis.replicate_commands() end

local cur = redis.call('HMGET', KEYS[1], 'name', 'owner', 'token')
if cur[1] == ARGV[1] and cur[2] == ARGV[2] and cur[3] == ARGV[3] then
  redis.call('DEL', KEYS[1])
  redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[5])
  local msg = ARGV[3]
  local first = marks_first(KEYS[3], KEYS[4])
  if first then
    msg = msg .. ' ' .. first
  end
  redis.call('PUBLISH', string.sub(KEYS[1], 1, -7) .. ':free', msg)
  return 1
end
if redis.call('GET', KEYS[2]) == ARGV[4] then
  return 1
end
return 0
