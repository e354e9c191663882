package etcdfence_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence"
	"github.com/leasekit/lease/fence/etcdfence"
)

// newFence returns a Fence under a fresh prefix on the shared server, its
// client, and the wire the client's requests go through.
func newFence(t *testing.T) (*etcdfence.Fence, *clientv3.Client, *wire, string) {
	prefix := randomPrefix("unit")
	deletePrefix(t, testEndpoints, prefix)
	w := &wire{}
	c := newClient(t, testEndpoints, w)
	f, err := etcdfence.New(c, etcdfence.WithPrefix(prefix+"fence/"))
	if err != nil {
		t.Fatal(err)
	}
	return f, c, w, prefix
}

// TestRoundTrips counts the requests of a guarded write next to the same
// write unguarded: one Txn where the plain write is one Put, accepted or
// refused (the refusal's winning token comes back in the same Txn).
func TestRoundTrips(t *testing.T) {
	f, c, w, prefix := newFence(t)
	ctx := context.Background()
	key := prefix + "data/report"
	if _, err := c.Get(ctx, key); err != nil { // connect first
		t.Fatal(err)
	}
	w.take()
	for _, step := range []struct {
		what, want string
		run        func() error
		wantErr    bool
	}{
		{"unguarded Put", "Put", func() error { _, err := c.Put(ctx, key, "v"); return err }, false},
		{"guarded Put, first of its name", "Txn", func() error { _, err := f.Do(ctx, "n", 10, clientv3.OpPut(key, "v")); return err }, false},
		{"guarded Put, accepted", "Txn", func() error { _, err := f.Do(ctx, "n", 11, clientv3.OpPut(key, "v")); return err }, false},
		{"guarded Put, refused", "Txn", func() error { _, err := f.Do(ctx, "n", 9, clientv3.OpPut(key, "v")); return err }, true},
		{"Check alone", "Txn", func() error { return f.Check(ctx, "n", 11) }, false},
	} {
		err := step.run()
		if (err != nil) != step.wantErr {
			t.Fatalf("%s: %v", step.what, err)
		}
		got := w.take()
		t.Logf("%s: %s", step.what, got)
		if got != step.want {
			t.Errorf("%s sent %q; want %q", step.what, got, step.want)
		}
	}
	// A name keeps one fence key, however many tokens it accepted.
	resp, err := c.Get(ctx, prefix+"fence/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || !strings.HasSuffix(string(resp.Kvs[0].Key), "/00000000000000000011") {
		t.Fatalf("fence keys after tokens 10 and 11: %v; want the one of 11", resp.Kvs)
	}
}

// TestGuardInOwnTxn tests Guard in a transaction with a comparison of the
// caller's own, and Refused telling the two failures apart, with and
// without the Read in Else.
func TestGuardInOwnTxn(t *testing.T) {
	f, c, w, prefix := newFence(t)
	ctx := context.Background()
	cfg, report := prefix+"data/config", prefix+"data/report"
	if _, err := c.Put(ctx, cfg, "v1"); err != nil {
		t.Fatal(err)
	}
	write := func(token uint64, wantCfg string, withRead bool) (*clientv3.TxnResponse, etcdfence.Guard) {
		t.Helper()
		g, err := f.Guard("report", token)
		if err != nil {
			t.Fatal(err)
		}
		txn := c.Txn(ctx).
			If(g.Cmp, clientv3.Compare(clientv3.Value(cfg), "=", wantCfg)).
			Then(append(g.Ops, clientv3.OpPut(report, "by "+wantCfg))...)
		if withRead {
			txn = txn.Else(g.Read)
		}
		resp, err := txn.Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp, g
	}
	resp, g := write(10, "v1", true)
	if !resp.Succeeded || f.Refused(ctx, g, resp) != nil {
		t.Fatalf("accepted write: succeeded=%v", resp.Succeeded)
	}
	// The caller's comparison fails, the fence's holds: not stale.
	resp, g = write(10, "v2", true)
	if resp.Succeeded {
		t.Fatal("the transaction succeeded although config is not v2")
	}
	w.take()
	if err := f.Refused(ctx, g, resp); err != nil {
		t.Fatalf("Refused when the caller's comparison failed: %v; want nil", err)
	}
	if got := w.take(); got != "" {
		t.Fatalf("Refused with the Read in Else sent %q; want nothing", got)
	}
	// The fence fails: stale, named from the Else branch.
	resp, g = write(5, "v1", true)
	w.take()
	var se *fence.StaleError
	if err := f.Refused(ctx, g, resp); !errors.As(err, &se) || se.Max != 10 || se.Token != 5 {
		t.Fatalf("Refused of a stale token: %v", err)
	}
	if got := w.take(); got != "" {
		t.Fatalf("Refused with the Read in Else sent %q; want nothing", got)
	}
	// Without the Read: one more request.
	resp, g = write(5, "v1", false)
	w.take()
	if err := f.Refused(ctx, g, resp); !errors.As(err, &se) || se.Max != 10 {
		t.Fatalf("Refused of a stale token without Read: %v", err)
	}
	if got := w.take(); got != "Range" {
		t.Fatalf("Refused without the Read in Else sent %q; want one Range", got)
	}
	got, err := c.Get(ctx, report)
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "by v1" {
		t.Fatalf("report after refusals: %v %v", got, err)
	}
}

// TestBadInput tests what is refused before anything is sent.
func TestBadInput(t *testing.T) {
	f, _, w, prefix := newFence(t)
	if _, err := etcdfence.New(nil); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New(nil): %v", err)
	}
	c := newClient(t, testEndpoints, nil)
	if _, err := etcdfence.New(c, etcdfence.WithPrefix("")); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("New with an empty prefix: %v", err)
	}
	for _, bad := range []struct {
		name  string
		token uint64
	}{{"", 1}, {"n", 0}, {"n", fence.MaxToken + 1}, {"\xff", 1}, {strings.Repeat("n", lease.MaxNameLen+1), 1}} {
		if _, err := f.Guard(bad.name, bad.token); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("Guard(%.10q, %d): %v; want ErrInvalid", bad.name, bad.token, err)
		}
	}
	if got := w.take(); got != "" {
		t.Errorf("bad input sent %q", got)
	}
	// An op on the fence's own keys is refused by etcd, and changes
	// nothing.
	ctx := context.Background()
	if _, err := f.Do(ctx, "n", 10); err != nil {
		t.Fatal(err)
	}
	_, err := f.Do(ctx, "n", 20, clientv3.OpDelete(prefix+"fence/", clientv3.WithPrefix()))
	if err == nil || errors.Is(err, fence.ErrStale) {
		t.Fatalf("Do with an op deleting the fence: %v; want etcd's error", err)
	}
	if err := f.Check(ctx, "n", 9); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("after the refused transaction, Check(9): %v; want stale against 10", err)
	}
}
