// Package driver is the side of lease that backends implement, as
// database/sql/driver is for database/sql: users of lease never need it.
//
// A backend implements Store, the store's side of each operation and
// nothing more, and wraps it with NewLocker, which gives a lease.Locker
// that does the contract's shared work once: it checks arguments, refuses
// calls after Close, reads the clock before each request and stamps the
// Deadline, turns outcomes into lease.HeldError, lease.ErrLost and
// lease.ErrNotHeld, and shapes every error as
//
//	lease/<backend>: <operation> "<name>": <cause>
//
// so that no backend can forget a rule the conformance suite checks. A
// backend's exported Locker type embeds the *Locker and adds constructors
// (New(client, opts...) (*Locker, error), and Open(ctx, url, opts...) for a
// URL), options and whatever is specific to its store. Optional
// capabilities (Lister, ForceReleaser) are Store interfaces too; the
// Locker's matching methods report errors.ErrUnsupported when the Store
// lacks them.
//
// The package also holds the helpers backends share: the argument checks
// (CheckAcquire, CheckName, ...), DeadlineFrom, and URL handling for
// Openers (ParseURL, URLQuery, Redact, which never lets a password reach
// an error).
package driver
