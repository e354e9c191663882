package fence

import "context"

// Checker keeps the fence of one resource: for each lease name, the
// largest token it has accepted.
//
// Check accepts a write tagged (name, token) when token is at least the
// largest token accepted for name so far, and raises that maximum to
// token; it returns nil then. Otherwise it changes nothing and returns an
// error matching ErrStale, a *StaleError carrying the larger token. Bad
// arguments give an error matching lease.ErrInvalid (see Validate); a
// failing store gives its own error, never one matching ErrStale.
//
// Check is the check alone: it is atomic with a write only if the write is
// made in the same store operation (see the package documentation). Every
// checker in this module implements it: Memory, sqlfence.Fence,
// redisfence.Fence and etcdfence.Fence.
type Checker interface {
	Check(ctx context.Context, name string, token uint64) error
}

// CheckerFunc adapts a function to a Checker, for instance to log a
// checker's errors before Middleware answers them:
//
//	logged := fence.CheckerFunc(func(ctx context.Context, name string, token uint64) error {
//		err := f.Check(ctx, name, token)
//		if err != nil && !errors.Is(err, fence.ErrStale) {
//			log.Printf("fence check for %q: %v", name, err)
//		}
//		return err
//	})
type CheckerFunc func(ctx context.Context, name string, token uint64) error

// Check calls f(ctx, name, token).
func (f CheckerFunc) Check(ctx context.Context, name string, token uint64) error {
	return f(ctx, name, token)
}
