package redislease

import (
	"context"
	"runtime"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/internal/combine"
)

// Concurrent calls share round trips (internal/combine). Acquire, Renew
// and Release each run one script. A call goes out at once while the
// Locker has fewer scripts on the wire than its client has connections
// (lanes: the client's PoolSize); the caller that takes a lane sends
// every call then waiting (up to maxPipeline) together, as one pipeline:
// one write and one read for all of them, on the client and on the
// server. So calls share a round trip only when they arrive together or
// while every connection is under way, never by waiting for a connection
// that is free; a call alone sends its own script, exactly as before.
//
// Redis spends much of a short script's time reading the request and
// writing the reply (system calls), not running it: with 8 goroutines on
// one Locker (2-CPU machine, Redis on loopback, two lanes), pipelines
// took the server's CPU per Acquire and Release from about 64µs to about
// 40µs. Each script in a pipeline does exactly what it does alone, in the
// order the calls were queued; a script that fails (NOSCRIPT, a script
// error) fails only its own call. The pipeline's context ends at the
// latest of its calls' deadlines, and a call whose own context ends first
// returns at once with its context's error: its script may still run, as
// a lone call's may once it is on the wire. go-redis resends a pipeline
// whose connection failed as it resends a lone command, and each script
// is safe to resend (Acquire re-enters, Renew extends again, Release
// recognises its own nonce).

// maxPipeline bounds the scripts in one pipeline.
const maxPipeline = 128

// scriptCall is one call's script and what it runs on.
type scriptCall struct {
	script *redis.Script
	keys   []string
	args   []any
	ack    bool // WAIT for WithReplicaAck's replicas after it
}

// pipeliner is the queue of the calls waiting for a lane.
type pipeliner = combine.Queue[scriptCall, any]

// newPipeliner returns the queue of a Locker on client.
func newPipeliner(client redis.UniversalClient) *pipeliner {
	return &pipeliner{Lanes: lanes(client), Max: maxPipeline, What: "requests"}
}

// lanes is the number of connections client keeps per server (PoolSize;
// go-redis's default, 10 per CPU, when the client does not say).
func lanes(client redis.UniversalClient) int {
	n := 0
	switch c := client.(type) {
	case *redis.Client:
		n = c.Options().PoolSize
	case *redis.ClusterClient:
		n = c.Options().PoolSize
	case *redis.Ring:
		n = c.Options().PoolSize
	}
	if n <= 0 {
		n = 10 * runtime.GOMAXPROCS(0)
	}
	return n
}

// call runs script for the calling operation: alone when a lane is free,
// otherwise in a pipeline with the other waiting calls. ack asks for
// WithReplicaAck's WAIT after it.
func (s *store) call(ctx context.Context, script *redis.Script, ack bool, keys []string, args ...any) (any, error) {
	return s.pipes.Do(ctx, scriptCall{script: script, keys: keys, args: args, ack: ack}, s.runAlone, s.runPipeline)
}

// runAlone runs one script as Script.Run does (EVALSHA, then EVAL when
// the server lacks it), with WAIT after it when c.ack says so.
func (s *store) runAlone(ctx context.Context, c scriptCall) (any, error) {
	if c.ack {
		return s.runScript(ctx, c.script, c.keys, c.args...)
	}
	return c.script.Run(ctx, s.client, c.keys, c.args...).Result()
}

// runPipeline sends calls as one pipeline of EVALSHAs (with WAIT at the
// end when one of them asks for it), then the ones the server answered
// NOSCRIPT as EVALs, which load their scripts, in one more pipeline; it
// returns each call's reply and error.
func (s *store) runPipeline(ctx context.Context, calls []scriptCall) ([]any, []error) {
	vs, errs := make([]any, len(calls)), make([]error, len(calls))
	pending := make([]int, len(calls))
	for i := range pending {
		pending[i] = i
	}
	for _, eval := range []bool{false, true} {
		pipe := s.client.Pipeline()
		cmds := make([]*redis.Cmd, len(pending))
		ack := false
		for k, i := range pending {
			c := calls[i]
			if eval {
				cmds[k] = c.script.Eval(ctx, pipe, c.keys, c.args...)
			} else {
				cmds[k] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
			}
			ack = ack || c.ack
		}
		var wait *redis.Cmd
		if ack {
			wait = s.wait(ctx, pipe)
		}
		_, _ = pipe.Exec(ctx) // each command keeps its own error
		ackErr := s.acknowledged(wait)
		var again []int
		for k, i := range pending {
			v, err := cmds[k].Result()
			if err != nil && !eval && redis.HasErrorPrefix(err, "NOSCRIPT") {
				again = append(again, i)
				continue
			}
			if err == nil && calls[i].ack && ackErr != nil {
				v, err = nil, ackErr
			}
			vs[i], errs[i] = v, err
		}
		if len(again) == 0 {
			break
		}
		pending = again
	}
	return vs, errs
}
