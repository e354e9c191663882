package redislease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/leasekit/lease"
)

// awkwardNames are names that break naive key schemes: hash-tag braces,
// NUL, separators, glob characters, Unicode, and the longest names.
func awkwardNames() []string {
	long := strings.Repeat("x", 1023)
	return []string{
		"a", "{a}", "a{b}c", "{", "}", "{}", "}{", "{{a}}", "a}b{c",
		"a\x00b", "a\x00", "\x00", "a:lease", "a:token", "a}:token",
		"*", "a?", "[a]", `a\b`, "日本語", "🙂", "e\u0301", "é",
		long + "a", long + "b", long + "{", long + "}", long + "\x00",
		strings.Repeat("ö", 512), strings.Repeat("{}", 512),
	}
}

// crc16 is the CRC16-CCITT (XMODEM) that Redis Cluster hashes keys with.
func crc16(b []byte) uint16 {
	var crc uint16
	for _, c := range b {
		crc ^= uint16(c) << 8
		for i := 0; i < 8; i++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// keySlot is a key's Redis Cluster hash slot, hash tags included, as the
// Cluster specification defines it.
func keySlot(key string) uint16 {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	return crc16([]byte(key)) % 16384
}

func TestKeySlotMatchesSpec(t *testing.T) {
	t.Parallel()
	// Examples from the Redis Cluster specification and CLUSTER KEYSLOT.
	for key, want := range map[string]uint16{
		"123456789":            0x31C3 % 16384,
		"somekey":              11058,
		"foo{hash_tag}":        2515,
		"{user1000}.following": keySlot("user1000"),
		"foo{}{bar}":           crc16([]byte("foo{}{bar}")) % 16384, // empty tag: whole key
	} {
		if got := keySlot(key); got != want {
			t.Errorf("keySlot(%q) = %d, want %d", key, got, want)
		}
	}
	if crc16([]byte("123456789")) != 0x31C3 {
		t.Fatalf("crc16 check value is %#x, want 0x31c3", crc16([]byte("123456789")))
	}
}

// TestAwkwardNamesMapToOneKeyPairInOneSlot checks the key mapping: each
// name gets two keys in one hash slot, no key is shared by two names, and
// no key grows with the name.
func TestAwkwardNamesMapToOneKeyPairInOneSlot(t *testing.T) {
	t.Parallel()
	for _, prefix := range []string{DefaultPrefix, "", "app:*?[x]\x00:"} {
		l := &store{prefix: prefix}
		seen := map[string]string{}
		for _, name := range awkwardNames() {
			lk, tk := l.keys(name)
			if lk == tk {
				t.Fatalf("name %q: lease and token keys are both %q", name, lk)
			}
			if keySlot(lk) != keySlot(tk) {
				t.Fatalf("name %q: lease key %q is in slot %d, token key %q in slot %d", name, lk, keySlot(lk), tk, keySlot(tk))
			}
			if rk := l.keyBase(name) + releasedSuffix + "1796226464272617"; keySlot(rk) != keySlot(lk) {
				t.Fatalf("name %q: release marker %q is in slot %d, lease key in slot %d", name, rk, keySlot(rk), keySlot(lk))
			}
			if !strings.HasPrefix(lk, prefix) || !strings.HasPrefix(tk, prefix) {
				t.Fatalf("name %q: keys %q, %q lack the prefix %q", name, lk, tk, prefix)
			}
			if n := len(lk) - len(prefix); n > 60 {
				t.Fatalf("name %q: lease key %q is %d bytes past the prefix", name, lk, n)
			}
			for _, k := range []string{lk, tk} {
				if other, dup := seen[k]; dup {
					t.Fatalf("names %q and %q share key %q", other, name, k)
				}
				seen[k] = name
			}
		}
	}
}

// TestAwkwardNamesStoredInFull acquires every awkward name on miniredis
// and checks that Redis holds exactly one key pair per name, with the
// full name inside.
func TestAwkwardNamesStoredInFull(t *testing.T) {
	t.Parallel()
	mr, _, l := newMiniLocker(t)
	ctx := context.Background()
	names := awkwardNames()
	for _, name := range names {
		if _, err := l.Acquire(ctx, name, "owner", time.Minute); err != nil {
			t.Fatalf("Acquire(%q): %v", name, err)
		}
	}
	if got := len(mr.Keys()); got != 2*len(names) {
		t.Fatalf("%d names made %d keys, want %d", len(names), got, 2*len(names))
	}
	for _, name := range names {
		lk, _ := l.s.keys(name)
		if got := mr.HGet(lk, "name"); got != name {
			t.Fatalf("lease key of %q stores the name %q", name, got)
		}
		got, err := l.Inspect(ctx, name)
		if err != nil || got.Name != name {
			t.Fatalf("Inspect(%q) = %v, %v", name, got, err)
		}
	}
}

func TestWithPrefixRefusesBraces(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	for _, p := range []string{"{", "}", "a{b}", "x{}"} {
		l, err := New(client, WithPrefix(p))
		if err == nil {
			l.Close()
			t.Errorf("New(client, WithPrefix(%q)) succeeded", p)
			continue
		}
		if !errors.Is(err, lease.ErrInvalid) || !strings.HasPrefix(err.Error(), "lease/redis: ") ||
			!strings.Contains(err.Error(), "WithPrefix") || !strings.Contains(err.Error(), fmt.Sprintf("%q", p)) {
			t.Errorf("New(client, WithPrefix(%q)): %v; want ErrInvalid naming WithPrefix and the prefix", p, err)
		}
	}
}

// newMiniLocker starts a miniredis and returns it with a client and a
// Locker on it; the client is closed when t ends.
func newMiniLocker(t testing.TB) (*miniredis.Miniredis, *redis.Client, *Locker) {
	t.Helper()
	mr := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	l, err := New(client)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return mr, client, l
}
