package lease_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
)

// records is a slog.Handler that keeps every record.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// lines returns "LEVEL message key=value ..." for each record.
func (r *records) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.recs {
		var b strings.Builder
		b.WriteString(rec.Level.String() + " " + rec.Message)
		rec.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.String())
			return true
		})
		out = append(out, b.String())
	}
	return out
}

func TestRunLogsTheLifeOfItsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &records{}
		l := memory.New()
		err := lease.Run(context.Background(), l, "nightly", 3*time.Second, func(ctx context.Context) error {
			time.Sleep(2500 * time.Millisecond)
			return nil
		}, lease.WithLogger(slog.New(rec)), lease.WithOwner("worker-1"))
		if err != nil {
			t.Fatal(err)
		}
		lines := rec.lines()
		want := []string{"INFO lease acquired", "DEBUG lease renewed", "INFO lease released"}
		for _, w := range want {
			i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, w) })
			if i < 0 {
				t.Fatalf("no %q line in:\n%s", w, strings.Join(lines, "\n"))
			}
			for _, attr := range []string{"lease.name=nightly", "lease.owner=worker-1", "lease.token=1"} {
				if !strings.Contains(lines[i], attr) {
					t.Errorf("line %q lacks %s", lines[i], attr)
				}
			}
		}
		if !strings.Contains(strings.Join(lines, "\n"), "lease.slack=") {
			t.Errorf("the renewal line does not say its slack:\n%s", strings.Join(lines, "\n"))
		}
	})
}

func TestRunLogsBusyAndLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &records{}
		l := memory.New()
		logger := lease.WithLogger(slog.New(rec))
		_ = lease.Run(context.Background(), l, "job", time.Second, func(ctx context.Context) error {
			_ = lease.Run(context.Background(), l, "job", time.Second, func(context.Context) error { return nil }, logger)
			held, _ := lease.FromContext(ctx)
			_, _ = l.ForceRelease(context.Background(), held.Name)
			<-ctx.Done()
			return nil
		}, logger)
		all := strings.Join(rec.lines(), "\n")
		for _, w := range []string{"INFO lease busy", "lease.holder=", "ERROR lease lost", "ERROR lease found lost at release"} {
			if !strings.Contains(all, w) {
				t.Errorf("no %q in:\n%s", w, all)
			}
		}
	})
}

func TestRunCanLogAHashInsteadOfTheName(t *testing.T) {
	rec := &records{}
	err := lease.Run(context.Background(), memory.New(), "customer-4711/secret", time.Second, func(context.Context) error { return nil },
		lease.WithLogger(slog.New(rec)), lease.WithHashedNames())
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(rec.lines(), "\n")
	if strings.Contains(all, "secret") || !strings.Contains(all, "lease.name_sha256=") {
		t.Fatalf("log lines:\n%s", all)
	}
}
