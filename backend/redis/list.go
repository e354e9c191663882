package redislease

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease/driver"
)

// scanCount is the COUNT hint of each SCAN call of List.
const scanCount = 1000

// List implements driver.Lister: the unexpired tenures whose names start
// with prefix, sorted by name.
//
// Cost: keys are named by a digest of the name, so Redis cannot select
// names by prefix. List SCANs every lease key under the Locker's key
// prefix (on every master of a Cluster, every shard of a Ring), then reads
// each one with inspect.lua, pipelined per SCAN page: one SCRIPT LOAD per
// node, then about two round trips per 1000 keys under the key prefix,
// whatever the name prefix. It is for operators, not for hot paths. The
// result is not a snapshot: tenures that start or end while it runs may or
// may not be included.
func (s *store) List(ctx context.Context, prefix string) ([]driver.Tenure, error) {
	var (
		out []driver.Tenure
		err error
	)
	var mu sync.Mutex // ForEachMaster and ForEachShard call fn concurrently
	each := func(ctx context.Context, c *redis.Client) error {
		got, err := s.listNode(ctx, c, prefix)
		mu.Lock()
		out = append(out, got...)
		mu.Unlock()
		return err
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, each)
	case *redis.Ring:
		err = c.ForEachShard(ctx, each)
	default:
		out, err = s.listNode(ctx, s.client, prefix)
	}
	if err != nil {
		return nil, callErr(ctx, err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// listNode lists the tenures on one node (or the whole store, for a
// client that is not a Cluster client or a Ring).
func (s *store) listNode(ctx context.Context, c redis.UniversalClient, prefix string) ([]driver.Tenure, error) {
	// Load the script first so that the pipelines can use EVALSHA: a
	// pipelined NOSCRIPT cannot fall back to EVAL.
	if err := c.ScriptLoad(ctx, inspectSrc).Err(); err != nil {
		return nil, err
	}
	var (
		out    []driver.Tenure
		cursor uint64
	)
	for {
		keys, next, err := c.Scan(ctx, cursor, s.leasePattern(), scanCount).Result()
		if err != nil {
			return out, err
		}
		if len(keys) > 0 {
			got, err := s.inspectKeysRetry(ctx, c, keys, prefix)
			out = append(out, got...)
			if err != nil {
				return out, err
			}
		}
		if next == 0 {
			return out, nil
		}
		cursor = next
	}
}

// inspectKeysRetry is inspectKeys, loading the script again when the
// server's script cache was flushed (SCRIPT FLUSH, a restart, a failover)
// between the load and the pipeline: a pipelined EVALSHA cannot fall back
// to EVAL by itself.
func (s *store) inspectKeysRetry(ctx context.Context, c redis.UniversalClient, keys []string, prefix string) ([]driver.Tenure, error) {
	for attempt := 0; ; attempt++ {
		got, err := s.inspectKeys(ctx, c, keys, prefix)
		if err == nil || attempt == 2 || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return got, err
		}
		if err := c.ScriptLoad(ctx, inspectSrc).Err(); err != nil {
			return nil, err
		}
	}
}

// inspectKeys runs inspect.lua on each lease key in one pipeline and keeps
// the tenures whose names start with prefix.
func (s *store) inspectKeys(ctx context.Context, c redis.UniversalClient, keys []string, prefix string) ([]driver.Tenure, error) {
	pipe := c.Pipeline()
	cmds := make([]*redis.Cmd, len(keys))
	for i, k := range keys {
		cmds[i] = inspectScript.EvalSha(ctx, pipe, []string{k}, "")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	var out []driver.Tenure
	for i, cmd := range cmds {
		got, held, err := parseTenure(cmd.Val())
		if err != nil {
			return out, fmt.Errorf("key %q: %w", keys[i], err)
		}
		if held && strings.HasPrefix(got.Name, prefix) {
			out = append(out, got)
		}
	}
	return out, nil
}
