package fence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
	"github.com/leasekit/lease/fence"
)

// The rule, on the in-memory checker: a write is accepted when its token
// is at least the largest accepted for its name, and a refusal names the
// token that beat it.
func Example() {
	var m fence.Memory
	ctx := context.Background()
	report := ""
	write := func(token uint64, text string) error {
		return m.Guard(ctx, "report", token, func() error { report = text; return nil })
	}

	fmt.Println(write(5, "draft by the first holder"))
	fmt.Println(write(7, "final by the second holder"))
	fmt.Println(write(7, "final, corrected")) // the same holder again
	err := write(5, "late draft")
	fmt.Println(errors.Is(err, fence.ErrStale))
	var stale *fence.StaleError
	if errors.As(err, &stale) {
		fmt.Println("refused:", stale.Token, "< max", stale.Max)
	}
	fmt.Println("other names are their own:", m.Check(ctx, "invoice", 1))
	fmt.Println("the report reads:", report)
	// Output:
	// <nil>
	// <nil>
	// <nil>
	// true
	// refused: 5 < max 7
	// other names are their own: <nil>
	// the report reads: final, corrected
}

// Fencing over HTTP: the holder's client carries its lease's name and
// token in headers (Transport, from the context lease.Run gives fn); the
// service checks them (Middleware) and guards its own write with the same
// checker, so that the check and the write are atomic.
func Example_http() {
	// The service: a report store that takes writes only from the newest
	// holder of the lease the request names.
	var (
		fences fence.Memory
		mu     sync.Mutex
		report string
	)
	put := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, token, _ := fence.FromContext(r.Context())
		body, _ := io.ReadAll(r.Body)
		err := fences.Guard(r.Context(), name, token, func() error {
			mu.Lock()
			defer mu.Unlock()
			report = string(body)
			return nil
		})
		var stale *fence.StaleError
		switch {
		case errors.As(err, &stale):
			fence.WriteStale(w, stale)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	srv := httptest.NewServer(fence.Middleware(&fences, put))
	defer srv.Close()

	// The holders: the same client, under two successive leases.
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: &fence.Transport{Base: base}}
	write := func(ctx context.Context, text string) error {
		req, err := http.NewRequestWithContext(ctx, "PUT", srv.URL+"/report", strings.NewReader(text))
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return fence.CheckResponse(resp) // *fence.StaleError on 409
	}

	locker := memory.New()
	defer locker.Close()
	ctx := context.Background()
	var first lease.Lease
	_ = lease.Run(ctx, locker, "report", time.Minute, func(ctx context.Context) error {
		first, _ = lease.FromContext(ctx)
		fmt.Println("first holder writes:", write(ctx, "draft"))
		return nil
	})
	_ = lease.Run(ctx, locker, "report", time.Minute, func(ctx context.Context) error {
		fmt.Println("second holder writes:", write(ctx, "final"))
		return nil
	})

	// A request of the first holder's that was delayed in the network
	// arrives now, tagged with its old token.
	req, _ := http.NewRequest("PUT", srv.URL+"/report", strings.NewReader("late draft"))
	_ = fence.SetHeader(req.Header, first.Name, first.Token)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("late request:", resp.Status, errors.Is(fence.CheckResponse(resp), fence.ErrStale))
	fmt.Println("the report reads:", report)
	// Output:
	// first holder writes: <nil>
	// second holder writes: <nil>
	// late request: 409 Conflict true
	// the report reads: final
}

// The header format: a name percent-encoded so that any lease name fits,
// and the token in decimal.
func ExampleSetHeader() {
	h := http.Header{}
	if err := fence.SetHeader(h, "reports/2026 Q1\x00", 1754000000000000); err != nil {
		panic(err)
	}
	fmt.Println(fence.HeaderName+":", h.Get(fence.HeaderName))
	fmt.Println(fence.HeaderToken+":", h.Get(fence.HeaderToken))
	name, token, err := fence.ParseHeader(h)
	fmt.Printf("%q %d %v\n", name, token, err)
	// Output:
	// Lease-Name: reports/2026%20Q1%00
	// Lease-Token: 1754000000000000
	// "reports/2026 Q1\x00" 1754000000000000 <nil>
}
