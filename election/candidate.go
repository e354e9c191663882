package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/driver"
)

// ErrResigned is the cause (context.Cause) of a leader's work context
// when the candidate resigned, and what Lead's error matches when the
// candidate resigned before it was elected.
var ErrResigned = errors.New("election: the candidate resigned")

// Work is what a leader does in one term. Its context is cancelled when
// the term ends: leadership lost (context.Cause matches lease.ErrLost),
// the candidate resigned (ErrResigned), or the campaign's context ended
// (that context's cause). The context is cancelled at the latest at the
// lease's Deadline, which comes before the store can give the office to
// anyone else. Work must return soon after its context is cancelled: the
// office is released only once it has returned, so the next leader never
// overlaps it. lease.FromContext on its context gives the lease as of its
// latest renewal.
type Work func(ctx context.Context, t Term) error

// Candidate campaigns for one office on one Locker. Make it with
// NewCandidate, then call Run (lead whenever elected, until told to stop)
// or Lead (one term). Its methods are safe for concurrent use; it
// campaigns in one Run or Lead call at a time.
type Candidate struct {
	l      lease.Locker
	office string
	cfg    config
	log    candidateLog

	mu      sync.Mutex
	active  *campaign       // the Run or Lead call in progress
	leading *Term           // the term being led, while its work runs
	leadCtx context.Context // that work's context
}

// campaignKey marks the contexts of a campaign, so that Resign can tell
// when the Work calls it.
type campaignKey struct{}

// campaign is one Run or Lead call, as Resign sees it.
type campaign struct {
	cancel  context.CancelCauseFunc
	done    chan struct{} // closed when the call returns
	handoff error         // what went wrong handing the office off; set before done is closed
}

// NewCandidate returns a candidate for office (the lease name) on l. It
// checks office and the options and returns an error matching
// lease.ErrInvalid that names the problem; it does not talk to the store.
func NewCandidate(l lease.Locker, office string, opts ...Option) (*Candidate, error) {
	cfg := config{ttl: DefaultTTL}
	for i, o := range opts {
		if o == nil {
			cfg.invalid("option %d is nil", i)
			continue
		}
		o(&cfg)
	}
	switch {
	case cfg.err != nil:
		return nil, cfg.err
	case l == nil:
		return nil, fmt.Errorf("%w: election: NewCandidate with a nil Locker", lease.ErrInvalid)
	}
	if err := driver.CheckName(office); err != nil {
		return nil, fmt.Errorf("election: office name: %w", err)
	}
	if cfg.id == "" {
		cfg.id = defaultID()
	}
	if err := checkMetadata(cfg.id, cfg.metadata); err != nil {
		return nil, err
	}
	return &Candidate{l: l, office: office, cfg: cfg, log: newCandidateLog(cfg.logger, office, cfg.id)}, nil
}

// ID returns the candidate's ID, as observers see it in Term.Leader.
func (c *Candidate) ID() string { return c.cfg.id }

// Office returns the name of the office the candidate campaigns for.
func (c *Candidate) Office() string { return c.office }

// Run campaigns for the office and leads it whenever elected, until told
// to stop: the loop a service that stands by runs.
//
//   - While another candidate leads, it waits in the office's line of
//     waiters where the store keeps one (a release wakes one standing-by
//     process, not all), else polling, and in any case at the leader's
//     expiry (lease.Run's WithWait; WithFairWait for arrival order).
//   - Elected, it calls OnStartedLeading's function, then fn with the term
//     and a context that ends with the term, and renews the lease while fn
//     runs (lease.Run).
//   - When leadership is lost, fn's context is cancelled; once fn has
//     returned and OnStoppedLeading's function has been called, Run stands
//     by and campaigns again.
//   - Store errors while campaigning are logged and retried with jittered
//     backoff (50ms doubling to 2s): a candidate outlives an outage.
//
// Run returns
//
//   - nil when it was told to stop, by Resign or by ctx ending, and the
//     handoff went well: fn's context was cancelled, fn returned, and only
//     then was the lease released, so the next leader never overlaps this
//     one's work. Otherwise the handoff's trouble: an error matching
//     lease.ErrLost if the lease was found lost at release, the release's
//     error if the store failed then (the lease expires on its own), and
//     fn's error unless it merely reports the cancellation (an error
//     matching context.Canceled, context.DeadlineExceeded or ErrResigned);
//   - fn's error, nil included, when fn returned on its own, before
//     leadership was lost, joined with the release's trouble: the work is
//     done, so the candidacy is over (a service's fn returns only when its
//     context ends);
//   - an error matching lease.ErrInvalid, lease.ErrClosed or
//     errors.ErrUnsupported (WithFairWait on a store without a line)
//     when campaigning cannot work.
//
// fn must return when its context is cancelled, before the term's
// Deadline: renewals stop when its context ends, so a fn that ignores it
// holds the office only until then. Run and Lead run on the calling
// goroutine and start none that outlives them.
func (c *Candidate) Run(ctx context.Context, fn Work) error {
	return c.campaign(ctx, fn, false)
}

// Lead campaigns for the office until elected, then leads it for one term,
// as Run does, and returns when the term is over: for a caller that
// decides itself what to do next (exit when leadership is lost, say).
//
// It returns fn's error joined, as lease.Run joins them, with an error
// matching lease.ErrLost when leadership was lost while fn ran or the
// lease was found lost at release, and with the release's error when the
// store failed then. When Resign or the end of ctx ended the term, a fn
// error that merely reports the cancellation is left out, as Run does.
// When Resign or the end of ctx came before the candidate was elected,
// it returns an error matching ErrResigned or ctx's error without calling
// fn. Store errors while campaigning are retried as in Run.
func (c *Candidate) Lead(ctx context.Context, fn Work) error {
	return c.campaign(ctx, fn, true)
}

// Resign ends the candidacy: the Run or Lead call in progress stops
// campaigning or, if the candidate leads, hands the office off: the
// work's context is cancelled (its cause is ErrResigned), the work
// returns, and only then is the lease released, so that the next
// candidate, woken by the store where it can notify, leads about one
// round trip later.
//
// Resign waits until that call has returned, or until ctx ends, and
// returns the handoff's trouble as Run does (nil when it went well, and
// when no call was in progress). A later Run or Lead campaigns again.
//
// Called with the Work's context (or one derived from it), Resign only
// cancels the campaign and returns nil at once, since waiting there would
// wait for itself; the handoff completes when the Work returns. Called
// from the Work or a callback with another context, it would wait
// forever: a Work that wants to step down returns instead, or resigns
// with its own context.
func (c *Candidate) Resign(ctx context.Context) error {
	c.mu.Lock()
	cp := c.active
	c.mu.Unlock()
	if cp == nil {
		return nil
	}
	cp.cancel(ErrResigned)
	if ctx.Value(campaignKey{}) == cp {
		return nil // from the Work itself
	}
	select {
	case <-cp.done:
		return cp.handoff
	case <-ctx.Done():
		return fmt.Errorf("election: %q: resigned, but gave up waiting for the handoff: %w", c.office, context.Cause(ctx))
	}
}

// Leading returns the term the candidate leads, and true, while its work
// may act as the leader: from just before OnStartedLeading's function is
// called until the work's context is cancelled.
func (c *Candidate) Leading() (Term, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leading == nil || c.leadCtx.Err() != nil {
		return Term{}, false
	}
	return *c.leading, true
}

// Campaign retries after a store error wait between retryMin and
// retryMax, doubling, with jitter.
const (
	retryMin = 50 * time.Millisecond
	retryMax = 2 * time.Second
)

// forever is how long a candidate waits for the office: lease.Run's
// WithWait with no practical limit.
const forever = 100 * 365 * 24 * time.Hour

// campaign is Run (once false) and Lead (once true).
func (c *Candidate) campaign(ctx context.Context, fn Work, once bool) (err error) {
	if fn == nil {
		return fmt.Errorf("%w: election: %q: nil Work", lease.ErrInvalid, c.office)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	cp := &campaign{cancel: cancel, done: make(chan struct{})}
	cctx = context.WithValue(cctx, campaignKey{}, cp)
	c.mu.Lock()
	if c.active != nil {
		c.mu.Unlock()
		return fmt.Errorf("%w: election: %q: the candidate is campaigning already (one Run or Lead call at a time)", lease.ErrInvalid, c.office)
	}
	c.active = cp
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.active = nil
		c.mu.Unlock()
		close(cp.done)
	}()

	c.log.log(slog.LevelInfo, "campaigning", slog.Duration("election.ttl", c.cfg.ttl))
	retry := retryMin
	for {
		if cctx.Err() != nil {
			return c.stopped(cctx, once)
		}
		led, lost, err := c.term(cctx, fn)
		switch stopping := cctx.Err() != nil; {
		case !led && stopping:
			return c.stopped(cctx, once)
		case !led && permanent(err):
			c.log.log(slog.LevelError, "cannot campaign", slog.Any("error", err))
			return err
		case !led:
			wait := retry/2 + rand.N(retry/2+1)
			c.log.log(slog.LevelWarn, "campaign failed; retrying", slog.Any("error", err), slog.Duration("election.retry_in", wait))
			sleep(cctx, wait)
			retry = min(retry*2, retryMax)
		case stopping:
			cp.handoff = err
			return err
		case once:
			return err
		case lost:
			retry = retryMin // stand by and campaign again
		default:
			return err
		}
	}
}

// stopped is what a campaign told to stop before it was elected returns.
func (c *Candidate) stopped(cctx context.Context, once bool) error {
	cause := context.Cause(cctx)
	if errors.Is(cause, ErrResigned) {
		c.log.log(slog.LevelInfo, "resigned")
	}
	if once {
		return fmt.Errorf("election: %q: not elected: %w", c.office, cause)
	}
	return nil
}

// permanent reports whether a campaign that failed with err can never
// succeed, so that retrying is pointless.
func permanent(err error) bool {
	return errors.Is(err, lease.ErrInvalid) || errors.Is(err, lease.ErrClosed) || errors.Is(err, errors.ErrUnsupported)
}

// term campaigns until elected and leads one term through lease.Run. led
// reports whether fn was called, lost whether leadership was lost before
// fn returned (rather than fn returning on its own); err is what
// lease.Run returned, without fn's error when fn only reported its
// cancellation by ctx.
func (c *Candidate) term(ctx context.Context, fn Work) (led, lost bool, err error) {
	owner := encodeOwner(c.cfg.id, c.cfg.metadata, newNonce())
	var (
		t     Term
		fnErr error
		over  bool // lease.Run returned rather than panicked
	)
	defer func() {
		if !led {
			return
		}
		c.setLeading(nil, nil)
		outcome := err
		if !over {
			outcome = fmt.Errorf("election: %q: the work of term %d panicked", c.office, t.Number)
		}
		level := slog.LevelInfo
		if outcome != nil {
			level = slog.LevelWarn
		}
		c.log.log(level, "term ended", slog.Uint64("election.term", t.Number), slog.Any("error", outcome))
		if c.cfg.stopped != nil {
			c.cfg.stopped(t, outcome)
		}
	}()

	opts := []lease.RunOption{lease.WithOwner(owner), lease.WithLogger(c.cfg.logger), lease.WithWait(forever)}
	if c.cfg.fair {
		opts[2] = lease.WithFairWait(forever)
	}
	err = lease.Run(ctx, c.l, c.office, c.cfg.ttl, func(lctx context.Context) error {
		if ctx.Err() != nil {
			return nil // told to stop as the office was granted: never lead
		}
		held, _ := lease.FromContext(lctx)
		t = Term{Office: c.office, Number: held.Token, Leader: c.cfg.id, Metadata: c.cfg.metadata, Owner: held.Owner, Expires: held.Expires}
		led = true
		c.setLeading(&t, lctx)
		c.log.log(slog.LevelInfo, "elected", slog.Uint64("election.term", t.Number))
		if c.cfg.started != nil {
			c.cfg.started(t)
		}
		fnErr = fn(lctx, t)
		lost = errors.Is(context.Cause(lctx), lease.ErrLost)
		return fnErr
	}, opts...)
	over = true
	if led && ctx.Err() != nil && isCancellation(ctx, fnErr) {
		err = without(err, fnErr)
	}
	return led, lost, err
}

func (c *Candidate) setLeading(t *Term, ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leading, c.leadCtx = t, ctx
}

// isCancellation reports whether err merely says that ctx was cancelled.
func isCancellation(ctx context.Context, err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrResigned) {
		return true
	}
	cause := context.Cause(ctx)
	return cause != nil && errors.Is(err, cause)
}

// without returns err, a join made by lease.Run of fn's error and its
// own, with fn's error e taken out.
func without(err, e error) error {
	if err == nil || e == nil {
		return err
	}
	if err == e {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	var rest []error
	for _, x := range j.Unwrap() {
		if x != e {
			rest = append(rest, x)
		}
	}
	return errors.Join(rest...)
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// candidateLog logs one candidate's events; its zero value logs nothing.
type candidateLog struct {
	l     *slog.Logger
	attrs []slog.Attr
}

func newCandidateLog(l *slog.Logger, office, id string) candidateLog {
	if l == nil {
		return candidateLog{}
	}
	return candidateLog{l: l, attrs: []slog.Attr{slog.String("election.office", office), slog.String("election.id", id)}}
}

func (g candidateLog) log(level slog.Level, msg string, attrs ...slog.Attr) {
	if g.l == nil {
		return
	}
	ctx := context.Background()
	if !g.l.Enabled(ctx, level) {
		return
	}
	g.l.LogAttrs(ctx, level, msg, append(g.attrs[:len(g.attrs):len(g.attrs)], attrs...)...)
}
