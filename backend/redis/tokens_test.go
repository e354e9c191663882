package redislease_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
	redislease "github.com/leasekit/lease/backend/redis"
)

// churn starts and releases n tenures of name and returns the last one.
func churn(t *testing.T, l lease.Locker, name string, n int) lease.Lease {
	t.Helper()
	ctx := context.Background()
	var last lease.Lease
	for i := 0; i < n; i++ {
		got, err := l.Acquire(ctx, name, "owner-"+strconv.Itoa(i), time.Minute)
		if err != nil {
			t.Fatalf("Acquire %d: %v", i, err)
		}
		if got.Token <= last.Token {
			t.Fatalf("tenure %d got token %d after %d", i, got.Token, last.Token)
		}
		if err := l.Release(ctx, got); err != nil {
			t.Fatalf("Release %d: %v", i, err)
		}
		last = got
	}
	return last
}

// TestTokenFloorAfterFlushAllMiniredis loses every counter with FLUSHALL
// and checks that the next token is still larger, thanks to the floor from
// the server's TIME. miniredis's TIME stands still between clock moves, so
// the 100 tenures before the flush push the counter past the floor: the
// token after the flush comes from the clock alone.
func TestTokenFloorAfterFlushAllMiniredis(t *testing.T) {
	mr, client, advance := newMiniredis(t)
	l := mustNew(t, client)
	before := churn(t, l, "jobs/flush", 100)
	mr.FlushAll()
	advance(time.Millisecond)
	after := churn(t, l, "jobs/flush", 1)
	if after.Token <= before.Token {
		t.Fatalf("after FLUSHALL the token went back from %d to %d", before.Token, after.Token)
	}
	t.Logf("token before FLUSHALL %d, after %d", before.Token, after.Token)
}

// TestTokenFloorAfterFlushRedis does the same on the real server, on its
// own database 15 (FLUSHDB there, so that nothing else is touched).
func TestTokenFloorAfterFlushRedis(t *testing.T) {
	client, _ := realRedis(t, 15)
	prefix := randomPrefix("flush")
	deleteKeys(t, client, prefix)
	l := mustNew(t, client, redislease.WithPrefix(prefix))
	before := churn(t, l, "jobs/flush", 100)
	if err := client.FlushDB(context.Background()).Err(); err != nil {
		t.Fatalf("FLUSHDB: %v", err)
	}
	after := churn(t, l, "jobs/flush", 1)
	if after.Token <= before.Token {
		t.Fatalf("after FLUSHDB the token went back from %d to %d", before.Token, after.Token)
	}
	t.Logf("token before FLUSHDB %d, after %d", before.Token, after.Token)
}

// TestTokenIsFlooredByServerTime checks that a first token is the server's
// TIME in microseconds, not 1.
func TestTokenIsFlooredByServerTime(t *testing.T) {
	mr, client, _ := newMiniredis(t)
	mr.SetTime(time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC))
	got := churn(t, mustNew(t, client), "jobs/first", 1)
	if want := uint64(time.Date(2030, 1, 2, 3, 4, 5, 6000, time.UTC).UnixMicro()); got.Token != want {
		t.Fatalf("first token is %d, want the server's TIME in microseconds, %d", got.Token, want)
	}
}

// tokenKey finds the one token counter key of a store with one name.
func tokenKey(t *testing.T, c *redis.Client, prefix string) string {
	t.Helper()
	keys, err := c.Keys(context.Background(), globEscape(prefix)+"*:token").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("token keys under %q: %v %v", prefix, keys, err)
	}
	return keys[0]
}

// testLargeTokensExact sets a name's counter just below 2^53 and checks
// that the script's arithmetic and its conversion to a reply keep every
// digit (Lua numbers are doubles; a careless tostring gives 9.007e+15).
func testLargeTokensExact(t *testing.T, client *redis.Client, prefix string) {
	ctx := context.Background()
	l := mustNew(t, client, redislease.WithPrefix(prefix))
	churn(t, l, "jobs/big", 1)
	key := tokenKey(t, client, prefix)
	const big = 1<<53 - 3
	if err := client.Set(ctx, key, strconv.FormatUint(big, 10), 0).Err(); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 2; i++ {
		got := churn(t, l, "jobs/big", 1)
		if got.Token != big+i {
			t.Fatalf("token after counter %d+%d is %d", uint64(big), i-1, got.Token)
		}
		stored, err := client.Get(ctx, key).Result()
		if err != nil || stored != strconv.FormatUint(big+i, 10) || strings.ContainsAny(stored, "e.") {
			t.Fatalf("counter holds %q (%v), want %d", stored, err, big+i)
		}
	}
}

func TestLargeTokensExactMiniredis(t *testing.T) {
	_, client, _ := newMiniredis(t)
	testLargeTokensExact(t, client, redislease.DefaultPrefix)
}

func TestLargeTokensExactRedis(t *testing.T) {
	client, _ := realRedis(t, -1)
	prefix := randomPrefix("bigtoken")
	deleteKeys(t, client, prefix)
	testLargeTokensExact(t, client, prefix)
}
