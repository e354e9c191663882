package lease

import "context"

// Lister is implemented by Lockers that can list the current tenures, for
// operators and the lease command's "list".
type Lister interface {
	// List returns the unexpired tenures whose names start with prefix
	// (all of them for ""), sorted by name, as Inspect would return them.
	List(ctx context.Context, prefix string) ([]Lease, error)
}

// ForceReleaser is implemented by Lockers that let an operator end a
// tenure without being its owner, for clearing a stuck lease.
type ForceReleaser interface {
	// ForceRelease ends the current tenure of name, whoever holds it, and
	// returns it. It returns an error matching ErrNotHeld when nobody holds
	// name. Token order is kept: the next tenure gets a larger token.
	ForceRelease(ctx context.Context, name string) (Lease, error)
}
