// Package redisfence checks fencing tokens in Redis and makes the guarded
// write in the same Lua script, over github.com/redis/go-redis/v9: the
// check, the write and the raise of the maximum happen in one step that no
// other client can come between.
//
//	f, err := redisfence.New(client, "report:42") // the data's hash tag
//	...
//	_, err = f.Do(ctx, l.Name, l.Token,
//		redisfence.Cmd("SET", "{report:42}:body", body),
//		redisfence.Cmd("HSET", "{report:42}:meta", "author", who))
//	if errors.Is(err, fence.ErrStale) {
//		// a newer holder has written: nothing was changed
//	}
//
// # Keys and Redis Cluster
//
// A Fence guards the data under one hash tag: every key a guarded write
// touches carries "{tag}", and the fence key of each lease name is
//
//	<prefix>{<tag>}:<name>     the largest token accepted, a decimal string; no expiry
//
// so the fence and the data hash to one Cluster slot, and one script may
// touch them all (Redis refuses a script whose keys span slots). Do
// refuses, before sending anything, a key without the tag; New refuses a
// tag holding '}' and a prefix holding a brace. The name is kept whole in
// the key after the tag: braces, NUL or 1024 bytes in it change nothing.
// The tag is the resource: one lease name has one maximum per tag, so put
// all the data one lease protects under one tag.
//
// # The script
//
// fence.lua (in this directory) reads the fence key, refuses a token below
// it with the stored maximum, and otherwise runs the commands on their
// keys, then raises the fence key to the token. Tokens are compared as
// decimal strings (by length, then digit by digit), exact up to
// fence.MaxToken, where a Lua number would round above 2^53. The commands
// a guarded write may make are an allow-list of single-key writes (SET,
// DEL, EXPIRE, PEXPIRE, INCRBY, INCRBYFLOAT, APPEND, HSET, HDEL, HINCRBY,
// LPUSH, RPUSH, SADD, SREM, ZADD, ZREM, XADD), so that the key declared in
// KEYS is the only one touched. A command Redis refuses fails the script
// with its error: the commands before it stay applied, as in MULTI/EXEC,
// and the maximum is not raised.
//
// # Cost
//
// A guarded write is one EVALSHA where the unguarded write is one SET: one
// round trip either way, accepted or refused, with any number of
// commands; two (EVALSHA, then EVAL) the first time a server lacks the
// script. TestCommandsPerWrite counts them; BenchmarkWrite measures the
// time. Check alone is the same script with no command.
//
// # Durability
//
// The fence is as durable as the Redis holding it: a restart without
// persistence, or a failover to a replica that missed the latest raise,
// forgets the maximum, and an older token could then be accepted once.
// Keep the data and its fence on one Redis (the hash tag sees to that
// within a Cluster): whatever loses the fence then loses the guarded
// write with it. TestFencetestRedisRestart runs the shared cases on a
// private server with an append-only file, restarted mid-way.
package redisfence
