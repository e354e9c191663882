// Command fencing shows why a lease carries a fencing token.
//
// A holder can pause at any moment (a stop-the-world garbage collection, a
// stopped VM, a swapped-out process) for longer than its lease. Meanwhile
// the lease expires and another worker takes it. When the first wakes up it
// still believes it holds the lease: a check just before writing cannot
// close that gap, because the pause can come between the check and the
// write. Only the system being written to can refuse the stale write, and
// the token is how it tells: every new tenure's token is larger.
//
// Here the storage service remembers the largest token it has seen and
// rejects writes carrying a smaller one. The memory backend's manual clock
// plays the pause.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// ErrStaleToken is the storage's answer to a write from a holder whose
// lease has since been given to someone else.
var ErrStaleToken = errors.New("rejected: a newer lease holder has written since")

// Storage is a service that takes writes only from the newest lease
// holder it knows of.
type Storage struct {
	mu     sync.Mutex
	newest uint64 // the largest token a write has carried
	data   map[string]string
}

// Write stores value under key if token is at least the newest token seen.
func (s *Storage) Write(token uint64, key, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if token < s.newest {
		return fmt.Errorf("write with token %d: %w (token %d)", token, ErrStaleToken, s.newest)
	}
	s.newest = token
	if s.data == nil {
		s.data = map[string]string{}
	}
	s.data[key] = value
	return nil
}

// Read returns the value under key.
func (s *Storage) Read(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data[key]
}

// run plays the story: worker-a pauses past its lease, worker-b takes
// over, and worker-a's late write is refused.
func run(ctx context.Context, out io.Writer) error {
	clock := memory.NewManualClock(time.Now())
	store := memory.New(memory.WithClock(clock))
	var storage Storage
	const ttl = 10 * time.Second

	a, err := store.Acquire(ctx, "report", "worker-a", ttl)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "worker-a holds the lease with token %d\n", a.Token)
	if err := storage.Write(a.Token, "report", "draft by worker-a"); err != nil {
		return err
	}
	fmt.Fprintln(out, "worker-a writes: ok")

	// worker-a checks that it still holds the lease, then pauses for 15s
	// before its next write. The store's clock moves on without it.
	if !a.Valid() {
		return errors.New("worker-a's lease should still be valid here")
	}
	clock.Advance(15 * time.Second)
	fmt.Fprintln(out, "worker-a pauses for 15s; its 10s lease expires")

	b, err := store.Acquire(ctx, "report", "worker-b", ttl)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "worker-b takes the lease with token %d\n", b.Token)
	if err := storage.Write(b.Token, "report", "final by worker-b"); err != nil {
		return err
	}
	fmt.Fprintln(out, "worker-b writes: ok")

	// worker-a wakes up and carries on with the write it was about to do.
	err = storage.Write(a.Token, "report", "late draft by worker-a")
	fmt.Fprintf(out, "worker-a wakes up and writes: %v\n", err)
	if !errors.Is(err, ErrStaleToken) {
		return errors.New("the stale write was accepted: the storage would hold worker-a's old draft")
	}
	// Its lease is gone, as Renew confirms.
	if _, err := store.Renew(ctx, a, ttl); !errors.Is(err, lease.ErrLost) {
		return fmt.Errorf("worker-a's Renew: got %v, want ErrLost", err)
	}
	fmt.Fprintf(out, "the report reads %q\n", storage.Read("report"))
	return nil
}
