package fence

import (
	"context"
	"fmt"
	"sync"
)

// Memory is a checker kept in this process's memory, for tests and for a
// resource that lives in one process. The zero Memory is ready to use and
// has accepted nothing; it is safe for concurrent use. Its maxima are lost
// with the process.
type Memory struct {
	mu  sync.Mutex
	max map[string]uint64
}

var _ Checker = (*Memory)(nil)

// Check accepts token for name if it is at least the largest accepted so
// far, raising the maximum, or returns a *StaleError (see Checker).
func (m *Memory) Check(ctx context.Context, name string, token uint64) error {
	return m.Guard(ctx, name, token, nil)
}

// Guard is the guarded write: if token is accepted for name it runs write
// and, when write returns nil, raises the maximum to token; otherwise it
// returns a *StaleError without calling write. A write that fails leaves
// the maximum as it was, as a rolled-back transaction would, and Guard
// returns its error.
//
// write runs while m is locked, so no other write of m can come between
// the check and it: keep it short, and do not call m from inside it.
func (m *Memory) Guard(ctx context.Context, name string, token uint64, write func() error) error {
	if err := Validate(name, token); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fence: check %q: %w", name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.max[name]; token < cur {
		return &StaleError{Name: name, Token: token, Max: cur}
	}
	if write != nil {
		if err := write(); err != nil {
			return err
		}
	}
	if m.max == nil {
		m.max = map[string]uint64{}
	}
	m.max[name] = token
	return nil
}

// Max returns the largest token accepted for name, or 0 if none was.
func (m *Memory) Max(name string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.max[name]
}
