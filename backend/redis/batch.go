package redislease

import (
	"context"
	"errors"
	"strconv"

	"github.com/leasekit/lease/driver"
	"github.com/redis/go-redis/v9"
)

var _ driver.BatchRenewer = (*store)(nil)

// batchPipeline bounds the renew.lua runs sent in one pipeline (one round
// trip): large enough that 10,000 renewals take 10 round trips, small
// enough that one pipeline's replies stay a few hundred kilobytes.
const batchPipeline = 1000

// RenewBatch implements driver.BatchRenewer: every item is one run of
// renew.lua, exactly as Renew runs it, and they go out as EVALSHA in
// pipelines of up to batchPipeline, one round trip each (a Cluster or
// Ring client splits a pipeline by node and sends the parts at once).
// Items the server answers NOSCRIPT (a flushed or restarted script cache)
// are sent again as EVAL, which loads the script, in one more pipeline.
// The runs of one pipeline execute in order, so a tenure named twice is
// renewed twice, as two Renews would renew it.
//
// An item whose command failed carries its error; the call returns an
// error only when the first pipeline failed on every item with no reply
// from the server (the connection or the context failed), so that nothing
// is known of any item.
func (s *store) RenewBatch(ctx context.Context, items []driver.RenewItem) ([]driver.RenewOutcome, error) {
	out := make([]driver.RenewOutcome, len(items))
	for from := 0; from < len(items); from += batchPipeline {
		to := min(from+batchPipeline, len(items))
		failed := s.renewPipeline(ctx, items[from:to], out[from:to])
		if failed != nil && from == 0 {
			return nil, failed
		}
	}
	return out, nil
}

// renewPipeline renews items in one pipeline (two when some need EVAL)
// and fills out. It returns the error when every item failed without a
// reply from the server, and fills out with it too.
func (s *store) renewPipeline(ctx context.Context, items []driver.RenewItem, out []driver.RenewOutcome) error {
	ms := make([]int64, len(items))
	args := make([][]any, len(items))
	keys := make([][]string, len(items))
	for i, it := range items {
		leaseKey := s.leaseKey(it.Tenure.Name)
		ms[i] = ttlMillis(it.TTL)
		keys[i] = []string{leaseKey}
		args[i] = []any{it.Tenure.Name, it.Tenure.Owner, strconv.FormatUint(it.Tenure.Token, 10), ms[i]}
	}
	var ackErr error // WithReplicaAck's verdict on the last pipeline
	run := func(idx []int, eval bool) []*redis.Cmd {
		pipe := s.client.Pipeline()
		cmds := make([]*redis.Cmd, len(idx))
		for k, i := range idx {
			if eval {
				cmds[k] = renewScript.Eval(ctx, pipe, keys[i], args[i]...)
			} else {
				cmds[k] = renewScript.EvalSha(ctx, pipe, keys[i], args[i]...)
			}
		}
		wait := s.wait(ctx, pipe) // after every write of the pipeline
		_, _ = pipe.Exec(ctx)     // each command keeps its own error
		ackErr = s.acknowledged(wait)
		return cmds
	}

	all := make([]int, len(items))
	for i := range all {
		all[i] = i
	}
	cmds := run(all, false)
	var noscript []int
	unanswered := 0
	var firstErr error
	for i, cmd := range cmds {
		err := cmd.Err()
		switch {
		case err == nil:
			out[i].Tenure, out[i].OK, out[i].Err = renewReply(cmd.Val(), items[i].Tenure.Name, ms[i])
			if out[i].OK && ackErr != nil {
				out[i] = driver.RenewOutcome{Err: ackErr}
			}
		case redis.HasErrorPrefix(err, "NOSCRIPT"):
			noscript = append(noscript, i)
		default:
			out[i].Err = callErr(ctx, err)
			if !isServerReply(err) {
				unanswered++
				if firstErr == nil {
					firstErr = out[i].Err
				}
			}
		}
	}
	if unanswered == len(items) {
		return firstErr
	}
	if len(noscript) > 0 {
		for k, cmd := range run(noscript, true) {
			i := noscript[k]
			if err := cmd.Err(); err != nil {
				out[i].Err = callErr(ctx, err)
				continue
			}
			out[i].Tenure, out[i].OK, out[i].Err = renewReply(cmd.Val(), items[i].Tenure.Name, ms[i])
			if out[i].OK && ackErr != nil {
				out[i] = driver.RenewOutcome{Err: ackErr}
			}
		}
	}
	return nil
}

// isServerReply reports whether err is an error reply from the server
// (the command reached it and was answered), not a failure to reach it.
func isServerReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}
