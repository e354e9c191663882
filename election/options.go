package election

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// Option configures a Candidate. An invalid option makes NewCandidate
// return an error matching lease.ErrInvalid that names it; options never
// panic.
type Option func(*config)

type config struct {
	ttl      time.Duration
	id       string
	metadata string
	fair     bool
	logger   *slog.Logger
	started  func(Term)
	stopped  func(Term, error)
	err      error // the first invalid option
}

// DefaultTTL is a Candidate's lease ttl unless WithTTL says otherwise: the
// longest a crashed leader keeps the office from the others (plus the
// store's expiry lag). The leader renews every third of it.
const DefaultTTL = 15 * time.Second

func (c *config) invalid(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%w: election: "+format, append([]any{lease.ErrInvalid}, args...)...)
	}
}

// WithTTL sets the ttl of the leader's lease (DefaultTTL otherwise): a
// leader that stops renewing, because it crashed or lost the store, keeps
// the office from the other candidates until the ttl runs out, and its
// work's context ends at the lease's Deadline, a little before. The
// leader renews every ttl/3. The ttl must be between lease.MinTTL and
// lease.MaxTTL, and at least the store's granularity (etcd: 1s).
func WithTTL(ttl time.Duration) Option {
	return func(c *config) {
		if err := driver.CheckTTL(ttl); err != nil {
			c.invalid("WithTTL: %s", detail(err))
			return
		}
		c.ttl = ttl
	}
}

// WithID sets the candidate's ID, which observers see as Term.Leader: a
// host or pod name, say. It must be non-empty UTF-8 of at most 242 bytes
// without spaces or control characters. Without it the ID is
// "hostname:pid". Two candidates may share an ID (a restarted process,
// say): each term's lease owner adds a fresh nonce, so they never share a
// tenure.
func WithID(id string) Option {
	return func(c *config) {
		if err := checkID(id); err != nil {
			c.invalid("WithID: %s", strings.TrimPrefix(detail(err), "election: "))
			return
		}
		c.id = id
	}
}

// WithMetadata makes the candidate publish md with each of its terms, for
// observers to read as Term.Metadata: the address it serves on, say. It
// is stored in the lease's owner, so it is written with the tenure in the
// same step and no observer ever sees one leader with another's metadata.
// md is UTF-8 without NUL, of at most 241 bytes minus the ID's length (a
// lease owner holds 255 bytes); NewCandidate says so when it is longer.
func WithMetadata(md string) Option {
	return func(c *config) { c.metadata = md }
}

// WithFairWait makes the candidates of the office take turns in arrival
// order: a candidate takes its place in the office's line of waiters in
// the store when it starts waiting, and the office goes to the
// longest-waiting candidate when it falls vacant, so a resigning leader
// that campaigns again goes to the back. It uses lease.Run's
// WithFairWait and needs a store that keeps a line of waiters (memory,
// Redis, etcd, PostgreSQL with a Listener); with any other Locker, Run
// and Lead return an error matching errors.ErrUnsupported.
func WithFairWait() Option {
	return func(c *config) { c.fair = true }
}

// WithLogger makes the candidate log its campaign through logger:
// elected, term ended and why, store errors while campaigning, resigned;
// and, through lease.Run's WithLogger, what happens to its lease
// (acquired, waiting, renewal trouble, lost, released). Every line carries
// the office, the candidate's ID and, while it leads, the term. A nil
// logger logs nothing, as does leaving the option out.
func WithLogger(logger *slog.Logger) Option {
	return func(c *config) { c.logger = logger }
}

// OnStartedLeading makes the candidate call f when it is elected, with the
// new term, before its work starts. OnStoppedLeading's function is called
// exactly once after each call of f, and neither is ever called for a term
// this candidate did not lead. f runs on the goroutine that called Run or
// Lead and delays the work: keep it short. A nil f calls nothing.
func OnStartedLeading(f func(Term)) Option {
	return func(c *config) { c.started = f }
}

// OnStoppedLeading makes the candidate call f when a term it led is over:
// its work has returned and the lease has been released (or found lost),
// so another candidate may lead from then on. f gets the term and how it
// ended: nil for a clean end (the work returned nil, or returned after
// Resign or the end of the campaign's context), else the error Lead
// would return for the term (an error matching lease.ErrLost when
// leadership was lost), or an error saying the work panicked, before the
// panic goes on up the stack. It is called exactly once per term that OnStartedLeading's function was
// called for, on the goroutine that called Run or Lead. A nil f calls
// nothing.
func OnStoppedLeading(f func(Term, error)) Option {
	return func(c *config) { c.stopped = f }
}

// detail is the message of err, an error matching lease.ErrInvalid,
// without the sentinel's text, to be wrapped again.
func detail(err error) string {
	return strings.TrimPrefix(err.Error(), lease.ErrInvalid.Error()+": ")
}

// defaultID is "hostname:pid", with any space or control character in the
// host name replaced by '_' and the name cut to 64 bytes.
func defaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	host = strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError {
			return '_'
		}
		return r
	}, host)
	if len(host) > 64 {
		host = host[:64]
		for len(host) > 0 && !utf8.ValidString(host) {
			host = host[:len(host)-1]
		}
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}
