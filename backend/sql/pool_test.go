package sqllease

import (
	"context"
	"errors"
	"testing"

	"github.com/leasekit/lease"
)

// TestWithPoolSize checks that OpenConnector bounds its pool by default
// and by WithPoolSize, that bad sizes are refused, and that New, whose
// pool is the caller's, refuses the option and leaves the pool alone.
func TestWithPoolSize(t *testing.T) {
	s := sqliteStore(t)
	l := s.openLocker(t)
	if got := l.s.db.Stats().MaxOpenConnections; got != DefaultMaxOpenConns {
		t.Errorf("OpenConnector's pool: at most %d connections; want DefaultMaxOpenConns, %d", got, DefaultMaxOpenConns)
	}
	l = s.openLocker(t, WithPoolSize(3, 1))
	if got := l.s.db.Stats().MaxOpenConnections; got != 3 {
		t.Errorf("OpenConnector with WithPoolSize(3, 1): at most %d connections; want 3", got)
	}
	for _, c := range [][2]int{{0, 0}, {-1, 0}, {2, 3}, {2, -1}} {
		_, err := OpenConnector(context.Background(), s.connector, WithPoolSize(c[0], c[1]))
		if !errors.Is(err, lease.ErrInvalid) || !contains(err, "WithPoolSize") {
			t.Errorf("OpenConnector with WithPoolSize(%d, %d): %v; want ErrInvalid naming WithPoolSize", c[0], c[1], err)
		}
	}
	if _, err := New(s.db, WithPoolSize(4, 2)); !errors.Is(err, lease.ErrInvalid) || !contains(err, "WithPoolSize") {
		t.Errorf("New with WithPoolSize: %v; want ErrInvalid naming WithPoolSize", err)
	}
	if got := s.db.Stats().MaxOpenConnections; got != 0 {
		t.Errorf("New changed the caller's pool: at most %d connections; want 0 (unbounded), as the caller left it", got)
	}
}
