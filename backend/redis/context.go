package redislease

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// callErr is the error of a request that failed under ctx. With
// ContextTimeoutEnabled, go-redis gives each socket read the context's
// deadline, so a server that does not answer makes the read fail with a
// network timeout at that deadline, which may come back a moment before
// the context itself reports DeadlineExceeded (and with MaxRetries -1,
// nothing waits for it to). callErr makes such an error match
// context.DeadlineExceeded once the deadline has passed, so that a timeout
// reads as the caller's timeout whichever of the two noticed first.
func callErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(err, cerr) {
			return err
		}
		return fmt.Errorf("%w: %w", cerr, err)
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return err
}
