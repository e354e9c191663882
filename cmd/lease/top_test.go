package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
)

// The tests of lease status, list and top (list --watch) run the command
// line in this process against an in-memory store the test holds leases
// in: testlister://NAME opens the store registered as NAME, as a Locker
// that can list (testlocker:// hides List) and that Close leaves open.

var (
	testListersMu sync.Mutex
	testListers   = map[string]listLocker{}
	testListerSeq atomic.Int64
)

// listLocker is a store that lists.
type listLocker interface {
	lease.Locker
	lease.Lister
}

func init() {
	lease.Register("testlister", func(ctx context.Context, u *url.URL) (lease.Locker, error) {
		testListersMu.Lock()
		defer testListersMu.Unlock()
		l, ok := testListers[u.Host]
		if !ok {
			return nil, fmt.Errorf("%w: no test Lister %q", lease.ErrInvalid, u.Host)
		}
		return openLister{l}, nil
	})
}

type openLister struct{ listLocker }

func (openLister) Close() error { return nil }

// registerLister makes l available as the URL it returns, for the test's
// lifetime.
func registerLister(t *testing.T, l listLocker) string {
	name := fmt.Sprintf("l%d", testListerSeq.Add(1))
	testListersMu.Lock()
	testListers[name] = l
	testListersMu.Unlock()
	t.Cleanup(func() {
		testListersMu.Lock()
		delete(testListers, name)
		testListersMu.Unlock()
	})
	return "testlister://" + name
}

// noAcquired is a store that does not record when tenures began, as etcd.
type noAcquired struct{ listLocker }

func (s noAcquired) Inspect(ctx context.Context, name string) (lease.Lease, error) {
	l, err := s.listLocker.Inspect(ctx, name)
	l.Acquired = time.Time{}
	return l, err
}

func (s noAcquired) List(ctx context.Context, prefix string) ([]lease.Lease, error) {
	ls, err := s.listLocker.List(ctx, prefix)
	for i := range ls {
		ls[i].Acquired = time.Time{}
	}
	return ls, err
}

// heldStore is a memory store holding jobs/a (by worker-1) and jobs/b
// (by worker-2) for an hour, and its URL.
func heldStore(t *testing.T, wrap func(listLocker) listLocker) (*memory.Locker, map[string]lease.Lease, string) {
	t.Helper()
	mem := memory.New()
	t.Cleanup(func() { mem.Close() })
	held := map[string]lease.Lease{}
	for name, owner := range map[string]string{"jobs/a": "worker-1", "jobs/b": "worker-2"} {
		l, err := mem.Acquire(context.Background(), name, owner, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		held[name] = l
	}
	var l listLocker = mem
	if wrap != nil {
		l = wrap(l)
	}
	return mem, held, registerLister(t, l)
}

func TestStatusShowsAcquired(t *testing.T) {
	_, held, u := heldStore(t, nil)
	a := held["jobs/a"]
	res := runInProcess(t, "--backend", u, "status", "jobs/a")
	want := fmt.Sprintf("jobs/a: held by worker-1, token %d, acquired %s, held for ", a.Token, a.Acquired.Local().Format(time.RFC3339))
	if res.code != 0 || !strings.HasPrefix(res.stdout, want) || !strings.Contains(res.stdout, " left (expires ") {
		t.Errorf("status: want a line starting %q\n%s", want, res)
	}
	res = runInProcess(t, "--backend", u, "status", "--json", "jobs/a")
	var v leaseJSON
	if err := json.Unmarshal([]byte(res.stdout), &v); err != nil || res.code != 0 {
		t.Fatalf("status --json: %v\n%s", err, res)
	}
	if got, err := time.Parse(time.RFC3339Nano, v.Acquired); err != nil || !got.Equal(a.Acquired) {
		t.Errorf("status --json: acquired %q (%v), want %s", v.Acquired, err, a.Acquired.UTC().Format(time.RFC3339Nano))
	}

	// A store that does not record it (etcd): "-", and no JSON field.
	_, _, u = heldStore(t, func(l listLocker) listLocker { return noAcquired{l} })
	res = runInProcess(t, "--backend", u, "status", "jobs/a")
	if res.code != 0 || !strings.Contains(res.stdout, ", acquired -, ") || strings.Contains(res.stdout, "held for") {
		t.Errorf("status on a store without Acquired: want \"acquired -\"\n%s", res)
	}
	res = runInProcess(t, "--backend", u, "status", "--json", "jobs/a")
	if res.code != 0 || strings.Contains(res.stdout, "acquired") {
		t.Errorf("status --json on a store without Acquired: want no acquired field\n%s", res)
	}
}

func TestListShowsAcquired(t *testing.T) {
	_, held, u := heldStore(t, nil)
	res := runInProcess(t, "--backend", u, "list")
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if res.code != 0 || len(lines) != 3 {
		t.Fatalf("list: want a header and two lines\n%s", res)
	}
	if f := strings.Fields(lines[0]); strings.Join(f, " ") != "NAME OWNER TOKEN ACQUIRED LEFT" {
		t.Errorf("list header %q, want NAME OWNER TOKEN ACQUIRED LEFT", lines[0])
	}
	for i, name := range []string{"jobs/a", "jobs/b"} {
		l := held[name]
		f := strings.Fields(lines[i+1])
		if len(f) != 5 || f[0] != name || f[1] != l.Owner || f[2] != fmt.Sprint(l.Token) || f[3] != l.Acquired.Local().Format(time.RFC3339) {
			t.Errorf("list line %q, want %s %s %d %s and the time left", lines[i+1], name, l.Owner, l.Token, l.Acquired.Local().Format(time.RFC3339))
		}
	}
	res = runInProcess(t, "--backend", u, "list", "--json", "jobs/")
	var all []leaseJSON
	if err := json.Unmarshal([]byte(res.stdout), &all); err != nil || len(all) != 2 {
		t.Fatalf("list --json: %v\n%s", err, res)
	}
	for _, v := range all {
		if got, err := time.Parse(time.RFC3339Nano, v.Acquired); err != nil || !got.Equal(held[v.Name].Acquired) {
			t.Errorf("list --json: %s acquired %q, want %s", v.Name, v.Acquired, held[v.Name].Acquired)
		}
	}

	_, _, u = heldStore(t, func(l listLocker) listLocker { return noAcquired{l} })
	res = runInProcess(t, "--backend", u, "list")
	lines = strings.Split(strings.TrimSpace(res.stdout), "\n")
	if res.code != 0 || len(lines) != 3 || strings.Fields(lines[1])[3] != "-" || strings.Fields(lines[2])[3] != "-" {
		t.Errorf("list on a store without Acquired: want \"-\" under ACQUIRED\n%s", res)
	}
	res = runInProcess(t, "--backend", u, "list", "--json")
	if res.code != 0 || strings.Contains(res.stdout, "acquired") {
		t.Errorf("list --json on a store without Acquired: want no acquired field\n%s", res)
	}
}

// TestListWatch checks lease list --watch and lease top off a terminal:
// --count tables one after another, each with its header line and bars,
// and no screen clearing.
func TestListWatch(t *testing.T) {
	mem, held, u := heldStore(t, nil)
	for _, args := range [][]string{
		{"list", "--watch", "--interval", "20ms", "--count", "3"},
		{"top", "--interval", "20ms", "--count", "3"},
		{"top", "--interval=20ms", "--count=3", "jobs/"},
	} {
		res := runInProcess(t, append([]string{"--backend", u}, args...)...)
		if res.code != 0 || res.stderr != "" {
			t.Fatalf("%v: want exit 0 and nothing on stderr\n%s", args, res)
		}
		if strings.Contains(res.stdout, "\x1b") {
			t.Errorf("%v: cleared the screen of a pipe\n%s", args, res)
		}
		frames := strings.Split(strings.TrimSpace(res.stdout), "\n\n")
		if len(frames) != 3 {
			t.Fatalf("%v: want 3 tables separated by blank lines, got %d\n%s", args, len(frames), res)
		}
		for _, fr := range frames {
			lines := strings.Split(fr, "\n")
			if len(lines) != 4 || !strings.Contains(lines[0], "2 leases held") || !strings.HasPrefix(lines[1], "NAME") {
				t.Fatalf("%v: want a header line, the column names and two leases in each table, got\n%s", args, fr)
			}
			for i, name := range []string{"jobs/a", "jobs/b"} {
				line := lines[i+2]
				// First seen with an hour left: the bar is full (its
				// scale is the longest time left seen).
				if !strings.HasPrefix(line, name) || !strings.Contains(line, held[name].Acquired.Local().Format(time.RFC3339)) || !strings.HasSuffix(line, "[##########]") {
					t.Errorf("%v: line %q, want %s, its ACQUIRED and a full bar", args, line, name)
				}
			}
		}
	}

	// A lease that ends between refreshes is gone from the next table.
	if err := mem.Release(context.Background(), held["jobs/b"]); err != nil {
		t.Fatal(err)
	}
	res := runInProcess(t, "--backend", u, "top", "--interval", "1ms", "--count", "2", "--json")
	lines := strings.Split(strings.TrimSpace(res.stdout), "\n")
	if res.code != 0 || len(lines) != 2 {
		t.Fatalf("top --json: want one JSON array per line, two lines\n%s", res)
	}
	for _, line := range lines {
		var all []leaseJSON
		if err := json.Unmarshal([]byte(line), &all); err != nil || len(all) != 1 || all[0].Name != "jobs/a" || all[0].Acquired == "" {
			t.Errorf("top --json line %q: want jobs/a alone, with acquired (%v)", line, err)
		}
	}
}

func TestListWatchUsage(t *testing.T) {
	_, _, u := heldStore(t, nil)
	for _, args := range [][]string{
		{"top", "--interval", "0"},
		{"top", "--count", "-1"},
		{"list", "--count", "2"},
		{"list", "--interval", "1s"},
		{"top", "--watch"},
		{"top", "a", "b"},
	} {
		res := runInProcess(t, append([]string{"--backend", u}, args...)...)
		if res.code != exitUsage || !oneLineWith(res.stderr) {
			t.Errorf("%v: want exit 2 and one line\n%s", args, res)
		}
	}
	// $LEASE_INTERVAL is a standing setting: plain list ignores it.
	t.Setenv("LEASE_INTERVAL", "5s")
	if res := runInProcess(t, "--backend", u, "list"); res.code != 0 {
		t.Errorf("list with $LEASE_INTERVAL set: want it ignored\n%s", res)
	}
}

func TestBar(t *testing.T) {
	for _, c := range []struct {
		left, full time.Duration
		want       string
	}{
		{10 * time.Second, 10 * time.Second, "[##########]"},
		{5 * time.Second, 10 * time.Second, "[#####     ]"},
		{7 * time.Second, 10 * time.Second, "[#######   ]"},
		{time.Millisecond, 10 * time.Second, "[#         ]"},
		{0, 10 * time.Second, "[          ]"},
		{0, 0, "[          ]"},
		{20 * time.Second, 10 * time.Second, "[##########]"},
	} {
		if got := bar(c.left, c.full, 10); got != c.want {
			t.Errorf("bar(%s, %s) = %q, want %q", c.left, c.full, got, c.want)
		}
	}
}

// TestBarScales checks the scale of a tenure's bar: the longest time left
// seen for it (the ttl once a renewal was seen), forgotten when the tenure
// is no longer listed.
func TestBarScales(t *testing.T) {
	now := time.Now()
	at := func(left time.Duration, token uint64) lease.Lease {
		return lease.Lease{Name: "x", Token: token, Expires: now.Add(left)}
	}
	var b barScales
	b.keep([]lease.Lease{at(20*time.Second, 1)}, now)
	if s := b.scale(at(20*time.Second, 1), 20*time.Second); s != 20*time.Second {
		t.Errorf("first seen: scale %s, want the time left, 20s", s)
	}
	b.keep([]lease.Lease{at(30*time.Second, 1)}, now) // renewed: a 30s ttl
	b.keep([]lease.Lease{at(15*time.Second, 1)}, now)
	if s := b.scale(at(15*time.Second, 1), 15*time.Second); s != 30*time.Second {
		t.Errorf("after a renewal: scale %s, want the longest seen, 30s", s)
	}
	if got := bar(15*time.Second, 30*time.Second, 10); got != "[#####     ]" {
		t.Errorf("half of the ttl left: %q", got)
	}
	b.keep([]lease.Lease{at(5*time.Second, 2)}, now) // a new tenure
	if s := b.scale(at(5*time.Second, 2), 5*time.Second); s != 5*time.Second || len(b.longest) != 1 {
		t.Errorf("new tenure: scale %s (%d remembered), want 5s and the old tenure forgotten", s, len(b.longest))
	}
}
