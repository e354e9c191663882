package conformance_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/conformance"
	"github.com/leasekit/lease/driver"
	"github.com/leasekit/lease/internal/faultproxy"
	"github.com/leasekit/lease/internal/testenv"
)

// A store reached over TCP, so that the suite's fault cases have a network
// to break: a memory store behind a JSON-lines server, and a driver.Store
// client that dials once per call. Broken modes of the client break one
// promise under faults each.

type netRequest struct {
	Op    string
	Name  string
	Owner string
	Token uint64
	TTL   time.Duration
}

type netReply struct {
	Owner     string
	Token     uint64
	Expires   time.Time
	Remaining time.Duration
	OK        bool
	Err       string
}

// serveNet serves l on a listener until the test ends.
func serveNet(t *testing.T, l *memory.Locker) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				var req netRequest
				if err := json.NewDecoder(c).Decode(&req); err != nil {
					return
				}
				_ = json.NewEncoder(c).Encode(answer(l, req))
			}()
		}
	}()
	return ln.Addr().String()
}

func answer(l *memory.Locker, req netRequest) netReply {
	ctx := context.Background()
	ls := lease.Lease{Name: req.Name, Owner: req.Owner, Token: req.Token}
	switch req.Op {
	case "acquire":
		got, err := l.Acquire(ctx, req.Name, req.Owner, req.TTL)
		var he *lease.HeldError
		if errors.As(err, &he) {
			return netReply{Owner: he.Owner, Remaining: he.Remaining, OK: true}
		}
		return netReply{Owner: got.Owner, Token: got.Token, Expires: got.Expires, OK: err == nil, Err: errText(err)}
	case "renew":
		got, err := l.Renew(ctx, ls, req.TTL)
		return netReply{Expires: got.Expires, OK: err == nil, Err: errText(err, lease.ErrLost)}
	case "release":
		err := l.Release(ctx, ls)
		return netReply{OK: err == nil, Err: errText(err, lease.ErrLost)}
	case "inspect":
		got, err := l.Inspect(ctx, req.Name)
		return netReply{Owner: got.Owner, Token: got.Token, Expires: got.Expires, OK: err == nil, Err: errText(err, lease.ErrNotHeld)}
	}
	return netReply{Err: "unknown op " + req.Op}
}

// errText is err's text, or "" when err is nil or one of outcomes.
func errText(err error, outcomes ...error) string {
	for _, o := range outcomes {
		if errors.Is(err, o) {
			return ""
		}
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// netStore is the client: a driver.Store that dials addr once per call.
type netStore struct {
	addr string
	mode string
}

func (s *netStore) call(ctx context.Context, req netRequest) (netReply, error) {
	rep, err := s.roundTrip(ctx, req)
	if err != nil && s.mode == "blind-resend" && ctx.Err() == nil {
		// Resend on any failure, as a client with retries does, without
		// knowing whether the first attempt was applied.
		rep, err = s.roundTrip(ctx, req)
	}
	return rep, err
}

func (s *netStore) roundTrip(ctx context.Context, req netRequest) (netReply, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return netReply{}, err
	}
	defer c.Close()
	deadline, ok := ctx.Deadline()
	if !ok || s.mode == "ignores-context" {
		deadline = time.Now().Add(5 * time.Second)
	}
	_ = c.SetDeadline(deadline)
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return netReply{}, err
	}
	var rep netReply
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&rep); err != nil {
		return netReply{}, err
	}
	if rep.Err != "" {
		return netReply{}, errors.New(rep.Err)
	}
	return rep, nil
}

func (s *netStore) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (driver.Tenure, error) {
	rep, err := s.call(ctx, netRequest{Op: "acquire", Name: name, Owner: owner, TTL: s.ttl(ttl)})
	return driver.Tenure{Owner: rep.Owner, Token: rep.Token, Expires: rep.Expires, Remaining: rep.Remaining}, err
}

func (s *netStore) Renew(ctx context.Context, t driver.Tenure, ttl time.Duration) (driver.Tenure, bool, error) {
	rep, err := s.call(ctx, netRequest{Op: "renew", Name: t.Name, Owner: t.Owner, Token: t.Token, TTL: s.ttl(ttl)})
	return driver.Tenure{Expires: rep.Expires}, rep.OK, err
}

// ttl is the ttl the client asks the store for: in mode "halves-ttl",
// half the caller's, so the store ends tenures before their Deadlines.
func (s *netStore) ttl(ttl time.Duration) time.Duration {
	if s.mode == "halves-ttl" {
		return ttl / 2
	}
	return ttl
}

func (s *netStore) Release(ctx context.Context, t driver.Tenure) (bool, error) {
	rep, err := s.call(ctx, netRequest{Op: "release", Name: t.Name, Owner: t.Owner, Token: t.Token})
	return rep.OK, err
}

func (s *netStore) Inspect(ctx context.Context, name string) (driver.Tenure, bool, error) {
	rep, err := s.call(ctx, netRequest{Op: "inspect", Name: name})
	return driver.Tenure{Owner: rep.Owner, Token: rep.Token, Expires: rep.Expires}, rep.OK, err
}

func (s *netStore) Close() error { return nil }

func netHarness(t *testing.T, mode string) conformance.Harness {
	addr := serveNet(t, memory.New())
	at := func(_ testing.TB, a string) lease.Locker {
		l := driver.NewLocker("net", &netStore{addr: a, mode: mode})
		if mode == "deadline-after-reply" {
			return lateDeadline{l}
		}
		return l
	}
	return conformance.Harness{
		New:     func(tb testing.TB) lease.Locker { return at(tb, addr) },
		TTL:     200 * time.Millisecond,
		Tenures: 100,
		Addr:    addr,
		NewAt:   at,
	}
}

// faultCases are the cases that need the proxy.
func faultResults(t *testing.T, mode string) map[string]conformance.Result {
	out := map[string]conformance.Result{}
	for _, r := range conformance.Check(t.Context(), netHarness(t, mode)) {
		if strings.Contains(r.Contract, "faults") {
			out[r.Case] = r
		}
	}
	return out
}

// lateDeadline reads the clock for the Deadline when the reply has come,
// rather than before the request: on a fast link the difference hides in
// the call's own duration.
type lateDeadline struct{ lease.Locker }

func (l lateDeadline) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (lease.Lease, error) {
	got, err := l.Locker.Acquire(ctx, name, owner, ttl)
	got.Deadline = time.Now().Add(ttl - lease.DriftMargin(ttl))
	return got, err
}

func (l lateDeadline) Renew(ctx context.Context, held lease.Lease, ttl time.Duration) (lease.Lease, error) {
	got, err := l.Locker.Renew(ctx, held, ttl)
	got.Deadline = time.Now().Add(ttl - lease.DriftMargin(ttl))
	return got, err
}

func TestFaultCasesPassAStoreThatKeepsThePromises(t *testing.T) {
	testenv.Slow(t)
	results := faultResults(t, "")
	if len(results) == 0 {
		t.Fatal("no fault cases ran")
	}
	for name, r := range results {
		if r.Outcome != conformance.Passed {
			t.Errorf("%s: %s: %s", name, r.Outcome, r.Reason)
		}
	}
}

func TestFaultCasesCatchBrokenClients(t *testing.T) {
	testenv.Slow(t)
	for mode, want := range map[string]string{
		"ignores-context": "every call on a store that stops answering returns by its context's deadline",
		"blind-resend":    "a Release whose reply is lost is not reported as lost",
		// The store ends tenures before their Deadlines: the holder's
		// work goes on after another owner took the name.
		"halves-ttl": "a holder whose store stops answering stops before anyone else takes over",
		// The Deadline is read when the reply arrives.
		"deadline-after-reply": "the Deadline counts from before the request when replies are slow",
	} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			r := conformance.CheckOnly(t.Context(), netHarness(t, mode), want)[0]
			if r.Outcome != conformance.Failed {
				t.Fatalf("case %q on a client broken by %q: %s %s", want, mode, r.Outcome, r.Reason)
			}
			t.Logf("%s: %s", r.Outcome, r.Reason)
		})
	}
}

// TestNetToyPasses runs the whole suite, fault cases included, against the
// TCP toy that keeps every promise.
func TestNetToyPasses(t *testing.T) {
	testenv.Slow(t)
	conformance.Run(t, netHarness(t, ""))
}

// TestSuitePassesASlowedStore runs the whole suite against the TCP toy,
// which keeps every promise, reached through a proxy that delays every
// request and every reply by 15ms (a far store, or a loaded one): no case
// may fail it. A case whose timing the delay breaks says it could not
// test, with the timings.
func TestSuitePassesASlowedStore(t *testing.T) {
	testenv.Slow(t)
	if testing.Short() {
		t.Skip("runs the whole suite through a slow link")
	}
	h := netHarness(t, "")
	p := faultproxy.StartT(t, h.Addr)
	p.Delay(faultproxy.Both, 15*time.Millisecond)
	h.New = func(tb testing.TB) lease.Locker { return h.NewAt(tb, p.Addr()) }
	h.TTL = 500 * time.Millisecond
	for _, r := range conformance.Check(t.Context(), h) {
		switch r.Outcome {
		case conformance.Failed, conformance.Errored:
			t.Errorf("%s: %s through a slow link: %s", r.Case, r.Outcome, r.Reason)
		case conformance.Untested:
			t.Logf("%s: could not test through a slow link: %s", r.Case, r.Reason)
		}
	}
}
