package lease

import (
	"context"
)

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

// Can reports whether l can do what the optional interface I promises (I
// is Lister, ForceReleaser or driver.Watcher), as its store can. A type
// assertion says which methods a Locker has; Can says whether they work:
// the SQL backend's Locker has Watch on every database, but only
// PostgreSQL with a Listener can watch. Can is true when l implements I
// and, when l has a method Can(p any) bool (every Locker of this module,
// and wrappers such as otellease, which pass the question on), that
// method says yes to a nil *I.
func Can[I any](l Locker) bool {
	if _, ok := l.(I); !ok {
		return false
	}
	if c, ok := l.(interface{ Can(p any) bool }); ok {
		return c.Can((*I)(nil))
	}
	return true
}
