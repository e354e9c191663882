package redisfence

import (
	"context"
	_ "embed" // fence.lua
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence"
)

//go:embed fence.lua
var fenceSrc string

// fenceScript checks and raises a fence and makes the guarded writes: one
// EVALSHA (EVAL the first time a server lacks it).
var fenceScript = redis.NewScript(fenceSrc)

// DefaultPrefix is the key prefix of a Fence made without WithPrefix.
const DefaultPrefix = "lease:fence:"

// Fence keeps the fences of the data under one Redis Cluster hash tag, and
// makes guarded writes to that data in one Lua script. It is safe for
// concurrent use and never closes its client.
type Fence struct {
	client redis.Scripter
	prefix string
	tag    string
}

var _ fence.Checker = (*Fence)(nil)

// Option configures New.
type Option func(*Fence)

// WithPrefix puts prefix before every fence key (DefaultPrefix,
// "lease:fence:", by default). The prefix must not be empty and may hold
// any bytes except '{' and '}', which would change the keys' hash tag;
// New refuses the others. Guarded writes may not touch keys under it.
func WithPrefix(prefix string) Option { return func(f *Fence) { f.prefix = prefix } }

// New returns a Fence for the data under the hash tag tag, on client: a
// single node, a Sentinel failover client, a Cluster client or a Ring.
//
// The tag is the resource the fence guards: every key a guarded write
// touches must carry it, as "{tag}" (the first '{' of the key and the
// first '}' after it enclose exactly tag: "{report:42}:body",
// "{report:42}"), so that the fence key and the data share one Cluster
// slot and one script can touch them all. A write to a key without it is
// refused before anything is sent. One lease name has one maximum per
// tag: guard all the data one lease protects under one tag, or a stale
// holder's write to another tag is judged by that tag's fence alone.
//
// The tag must be non-empty and hold no '}'; the error matches
// lease.ErrInvalid.
func New(client redis.Scripter, tag string, opts ...Option) (*Fence, error) {
	if client == nil {
		return nil, fmt.Errorf("fence/redis: %w: nil client", lease.ErrInvalid)
	}
	if tag == "" || strings.Contains(tag, "}") {
		return nil, fmt.Errorf("fence/redis: %w: hash tag %q must be non-empty and hold no '}'", lease.ErrInvalid, tag)
	}
	f := &Fence{client: client, prefix: DefaultPrefix, tag: tag}
	for _, o := range opts {
		o(f)
	}
	switch {
	case f.prefix == "":
		return nil, fmt.Errorf("fence/redis: %w: empty key prefix: the fence keys would share the data's names", lease.ErrInvalid)
	case strings.ContainsAny(f.prefix, "{}"):
		return nil, fmt.Errorf("fence/redis: %w: key prefix %q contains a brace, which would change the Redis Cluster hash tag", lease.ErrInvalid, f.prefix)
	}
	return f, nil
}

// Tag returns the hash tag the Fence guards, without braces.
func (f *Fence) Tag() string { return f.tag }

// Key returns the fence key of name:
//
//	<prefix>{<tag>}:<name>
//
// holding the largest token accepted for name, as a decimal string, with
// no expiry (an expired fence would let every old token through again).
// The name is kept whole: the hash tag ends at the first '}', so braces,
// NUL or 1024 bytes in the name change nothing.
func (f *Fence) Key(name string) string {
	return f.prefix + "{" + f.tag + "}:" + name
}

// Command is one guarded write: a Redis command on one key under the
// Fence's hash tag, with the arguments that follow the key. Build it with
// Cmd.
type Command struct {
	// Name is the command, in any case: one of those Do lists.
	Name string
	// Key is the one key the command writes; it must carry the Fence's
	// hash tag.
	Key string
	// Args are the arguments after the key, as go-redis takes them.
	Args []any
}

// Cmd returns the command name key args..., as it would be sent to Redis:
// Cmd("SET", "{report}:body", text, "EX", 3600),
// Cmd("HSET", "{report}:meta", "author", who, "at", when).
func Cmd(name, key string, args ...any) Command {
	return Command{Name: name, Key: key, Args: args}
}

// allowed are the commands a guarded write may make: writes to the one
// key that follows the command name, which the script declares in KEYS,
// so Cluster routes them with the fence and no other key is touched.
var allowed = map[string]bool{
	"SET": true, "DEL": true, "EXPIRE": true, "PEXPIRE": true,
	"INCRBY": true, "INCRBYFLOAT": true, "APPEND": true,
	"HSET": true, "HDEL": true, "HINCRBY": true,
	"LPUSH": true, "RPUSH": true,
	"SADD": true, "SREM": true,
	"ZADD": true, "ZREM": true,
	"XADD": true,
}

// maxArgs bounds a command's arguments: the script passes them with
// Lua's unpack, whose stack holds about 8000 values in Redis (and 5120 in
// miniredis, which tests use).
const maxArgs = 4096

// Do makes the guarded writes cmds, in order, if token is accepted for
// name, in one Lua script (fence.lua): the check, the writes and the raise
// of the maximum happen in one step that no other client can come between.
//
// It returns the commands' replies, in order, when accepted. When a larger
// token was accepted before, it returns an error matching fence.ErrStale,
// a *fence.StaleError with that token, having run no command. With no
// commands, Do is Check.
//
// The commands are SET, DEL, EXPIRE, PEXPIRE, INCRBY, INCRBYFLOAT, APPEND,
// HSET, HDEL, HINCRBY, LPUSH, RPUSH, SADD, SREM, ZADD, ZREM and XADD, on a
// key carrying the Fence's hash tag, with at most 4096 arguments each.
// Anything else is refused, with nothing sent, by an error matching
// lease.ErrInvalid. A command Redis refuses (WRONGTYPE, a syntax error)
// fails the script: the commands before it stay applied, as in MULTI/EXEC,
// and the maximum is not raised.
func (f *Fence) Do(ctx context.Context, name string, token uint64, cmds ...Command) ([]any, error) {
	if err := fence.Validate(name, token); err != nil {
		return nil, err
	}
	keys := make([]string, 1, 1+len(cmds))
	keys[0] = f.Key(name)
	args := []any{strconv.FormatUint(token, 10)}
	for i, c := range cmds {
		cmd := strings.ToUpper(c.Name)
		if !allowed[cmd] {
			return nil, fmt.Errorf("fence/redis: %w: command %d, %q, is not one a guarded write may make (SET, DEL, EXPIRE, PEXPIRE, INCRBY, INCRBYFLOAT, APPEND, HSET, HDEL, HINCRBY, LPUSH, RPUSH, SADD, SREM, ZADD, ZREM, XADD)", lease.ErrInvalid, i+1, c.Name)
		}
		if tag, ok := hashTag(c.Key); !ok || tag != f.tag {
			return nil, fmt.Errorf("fence/redis: %w: command %d, %s %q: the key lacks the fence's hash tag {%s}, so Redis Cluster may keep it on another node: name it \"{%s}...\"", lease.ErrInvalid, i+1, cmd, c.Key, f.tag, f.tag)
		}
		if strings.HasPrefix(c.Key, f.prefix+"{"+f.tag+"}:") {
			return nil, fmt.Errorf("fence/redis: %w: command %d, %s %q: the key is under the fence keys' prefix %q: a guarded write must not touch a fence", lease.ErrInvalid, i+1, cmd, c.Key, f.prefix)
		}
		if len(c.Args) > maxArgs {
			return nil, fmt.Errorf("fence/redis: %w: command %d, %s, has %d arguments; at most %d fit in one script call", lease.ErrInvalid, i+1, cmd, len(c.Args), maxArgs)
		}
		keys = append(keys, c.Key)
		args = append(args, cmd, len(c.Args))
		args = append(args, c.Args...)
	}
	v, err := fenceScript.Run(ctx, f.client, keys, args...).Result()
	if err != nil {
		return nil, fmt.Errorf("fence/redis: guarded write for %q on {%s}: %w", name, f.tag, err)
	}
	return parseReply(v, name, token, len(cmds))
}

// Check checks and raises the fence of name, with no write (see
// fence.Checker), for fence.Middleware. It is Do with no commands: one
// script, one round trip. It is not atomic with any write: use Do for
// that.
func (f *Fence) Check(ctx context.Context, name string, token uint64) error {
	_, err := f.Do(ctx, name, token)
	return err
}

// parseReply reads the script's answer.
func parseReply(v any, name string, token uint64, n int) ([]any, error) {
	r, ok := v.([]any)
	if !ok || len(r) < 1 {
		return nil, fmt.Errorf("fence/redis: guarded write for %q: unexpected reply %v", name, v)
	}
	verdict, _ := r[0].(int64)
	switch {
	case verdict == 1 && len(r) == 1+n:
		return r[1:], nil
	case verdict == 0 && len(r) == 2:
		s, _ := r[1].(string)
		max, err := strconv.ParseUint(s, 10, 64)
		if err != nil || max <= token {
			return nil, fmt.Errorf("fence/redis: guarded write for %q: the fence key holds %q, not a token above %d", name, r[1], token)
		}
		return nil, &fence.StaleError{Name: name, Token: token, Max: max}
	}
	return nil, fmt.Errorf("fence/redis: guarded write for %q: unexpected reply %v", name, v)
}

// hashTag returns the part of key that Redis Cluster hashes when it is a
// hash tag: between the first '{' and the first '}' after it, if that is
// not empty.
func hashTag(key string) (string, bool) {
	s := strings.IndexByte(key, '{')
	if s < 0 {
		return "", false
	}
	e := strings.IndexByte(key[s+1:], '}')
	if e <= 0 {
		return "", false
	}
	return key[s+1 : s+1+e], true
}
