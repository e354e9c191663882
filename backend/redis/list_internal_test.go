package redislease

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// List pipelines EVALSHA, which cannot fall back to EVAL; a script cache
// flushed between its SCRIPT LOAD and the pipeline must not fail it.
func TestListSurvivesAFlushedScriptCache(t *testing.T) {
	t.Parallel()
	_, client, l := newMiniLocker(t)
	ctx := context.Background()
	for _, name := range []string{"job:a", "job:b"} {
		if _, err := l.Acquire(ctx, name, "owner", time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	keys, _, err := client.Scan(ctx, 0, l.s.leasePattern(), 100).Result()
	if err != nil || len(keys) != 2 {
		t.Fatalf("SCAN = %v, %v", keys, err)
	}
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.s.inspectKeys(ctx, client, keys, "job:"); !redis.HasErrorPrefix(err, "NOSCRIPT") {
		t.Fatalf("without a reload the pipeline got %v; the test no longer sets up a flushed cache", err)
	}
	got, err := l.s.inspectKeysRetry(ctx, client, keys, "job:")
	if err != nil || len(got) != 2 {
		t.Fatalf("inspectKeysRetry after SCRIPT FLUSH = %v, %v; want both tenures", got, err)
	}
}
