-- dequeue.lua: take an owner's place in a name's line away (Dequeue), and
-- tell the name's watchers, since the next waiter may be first now.
--
-- KEYS[1]  the line (see queue.lua): <base>:queue, whose base also names
--          the pub/sub channel <base>:free (see watch.go)
-- KEYS[2]  the places
-- ARGV[1]  the owner
--
-- Returns 1 when the owner had a place, 0 otherwise.

if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then
  redis.call('HDEL', KEYS[2], ARGV[1])
  return 0
end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('PUBLISH', string.sub(KEYS[1], 1, -7) .. ':free', 'dequeued')
return 1
