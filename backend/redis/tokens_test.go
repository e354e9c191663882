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
	"github.com/leasekit/lease/driver"
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	_, client, _ := newMiniredis(t)
	testLargeTokensExact(t, client, redislease.DefaultPrefix)
}

func TestLargeTokensExactRedis(t *testing.T) {
	t.Parallel()
	client, _ := realRedis(t, -1)
	prefix := randomPrefix("bigtoken")
	deleteKeys(t, client, prefix)
	testLargeTokensExact(t, client, prefix)
}

// tokenMemory is the package's tokenMemory (keys.go): how long a name's
// last token is kept once the server's clock has passed it.
const tokenMemory = 10 * time.Minute

// checkTokenKeyExpires fails unless the one token key under prefix has an
// expiry no later than tokenMemory (plus a second for rounding) from now.
func checkTokenKeyExpires(t *testing.T, client *redis.Client, prefix, when string) {
	t.Helper()
	key := tokenKey(t, client, prefix)
	left, err := client.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("%s: PTTL %s: %v", when, key, err)
	}
	if left <= 0 || left > tokenMemory+time.Second {
		t.Fatalf("%s: token key %s has PTTL %s, want an expiry within %s", when, key, left, tokenMemory)
	}
}

// testTokenMemoryExpires checks that a name's token key expires after
// every way of starting a tenure (Acquire, AcquireOrWait) and after
// Release, and that tokens still grow when the key is gone, once the
// server's clock has passed the last token (forward moves the clock
// forward by at least a millisecond).
func testTokenMemoryExpires(t *testing.T, client *redis.Client, prefix string, forward func()) {
	ctx := context.Background()
	l := mustNew(t, client, redislease.WithPrefix(prefix))
	first, err := l.Acquire(ctx, "jobs/memory", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	checkTokenKeyExpires(t, client, prefix, "after Acquire")
	if err := l.Release(ctx, first); err != nil {
		t.Fatal(err)
	}
	checkTokenKeyExpires(t, client, prefix, "after Release")
	got, err := redislease.AcquireOrWait(ctx, l, "jobs/memory", "b", time.Minute, driver.Mark{Waiter: "waiter-b", Life: time.Minute, Fair: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Owner != "b" || got.Token <= first.Token {
		t.Fatalf("fair AcquireOrWait got %+v after token %d", got, first.Token)
	}
	checkTokenKeyExpires(t, client, prefix, "after AcquireOrWait")
	waited := lease.Lease{Name: "jobs/memory", Owner: "b", Token: got.Token, Deadline: got.Expires}
	if err := l.Release(ctx, waited); err != nil {
		t.Fatal(err)
	}
	last := churn(t, l, "jobs/memory", 50)
	if last.Token <= waited.Token {
		t.Fatalf("token %d after %d", last.Token, waited.Token)
	}
	checkTokenKeyExpires(t, client, prefix, "after 50 tenures")
	forward()
	if err := client.Del(ctx, tokenKey(t, client, prefix)).Err(); err != nil {
		t.Fatal(err)
	}
	after := churn(t, l, "jobs/memory", 50)
	if after.Token <= last.Token {
		t.Fatalf("with the token key deleted, the token went back from %d to %d", last.Token, after.Token)
	}
	checkTokenKeyExpires(t, client, prefix, "after the key was deleted")
}

func TestTokenMemoryExpiresMiniredis(t *testing.T) {
	t.Parallel()
	_, client, advance := newMiniredis(t)
	testTokenMemoryExpires(t, client, redislease.DefaultPrefix, func() { advance(time.Millisecond) })
}

func TestTokenMemoryExpiresRedis(t *testing.T) {
	t.Parallel()
	client, _ := realRedis(t, -1)
	prefix := randomPrefix("memory")
	deleteKeys(t, client, prefix)
	testTokenMemoryExpires(t, client, prefix, func() { time.Sleep(2 * time.Millisecond) })
}

// TestTokenMemoryOutlastsClockStepMiniredis steps the server's clock back
// by less than tokenMemory and checks that tokens still grow (the key
// remembers the last one), then lets the key expire and checks that the
// clock alone keeps them growing.
func TestTokenMemoryOutlastsClockStepMiniredis(t *testing.T) {
	t.Parallel()
	mr, client, advance := newMiniredis(t)
	l := mustNew(t, client)
	before := churn(t, l, "jobs/step", 3)
	advance(-tokenMemory + time.Second)
	stepped := churn(t, l, "jobs/step", 3)
	if stepped.Token <= before.Token {
		t.Fatalf("after the clock stepped back, the token went back from %d to %d", before.Token, stepped.Token)
	}
	// The key lasts until tokenMemory after the clock passes its token:
	// the clock is now 3s past it, and then tokenMemory more.
	advance(tokenMemory + 2*time.Second)
	if key := tokenKey(t, client, redislease.DefaultPrefix); !mr.Exists(key) {
		t.Fatalf("token key %s expired before the clock passed its token by %s", key, tokenMemory)
	}
	advance(tokenMemory)
	if keys, _ := client.Keys(context.Background(), "*:token").Result(); len(keys) != 0 {
		t.Fatalf("token keys %v still exist after the clock passed their token by %s", keys, tokenMemory)
	}
	after := churn(t, l, "jobs/step", 1)
	if after.Token <= stepped.Token {
		t.Fatalf("after the token key expired, the token went back from %d to %d", stepped.Token, after.Token)
	}
}
