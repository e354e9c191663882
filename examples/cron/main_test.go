package main

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/backend/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestREADME runs the program as `go run ./examples/cron` does, with no
// flag and no $LEASE_BACKEND, and compares its output with README.md's.
func TestREADME(t *testing.T) {
	var out, errs strings.Builder
	if err := cli(t.Context(), nil, noEnv, &out, &errs); err != nil {
		t.Fatalf("cli: %v\n%s%s", err, out.String(), errs.String())
	}
	if want := readmeOutput(t, "go run ./examples/cron"); out.String() != want {
		t.Errorf("the program prints:\n%s\nREADME.md shows:\n%s", out.String(), want)
	}
}

// TestBackendFromEnvironment: without --backend, $LEASE_BACKEND names the
// store, and the program says which it used.
func TestBackendFromEnvironment(t *testing.T) {
	backend := stores[1].url(t) // a SQLite file
	env := func(k string) string {
		if k == "LEASE_BACKEND" {
			return backend
		}
		return ""
	}
	var out, errs strings.Builder
	if err := cli(t.Context(), nil, env, &out, &errs); err != nil {
		t.Fatalf("cli: %v\n%s%s", err, out.String(), errs.String())
	}
	if first, _, _ := strings.Cut(out.String(), "\n"); first != "store: "+backend {
		t.Errorf("first line %q, want %q", first, "store: "+backend)
	}
}

// tokens matches the fencing tokens in the program's output, which depend
// on the store.
var tokens = regexp.MustCompile(`token [0-9]+`)

// TestDemo runs the program on every store, under a job name of its own,
// and compares its output with README.md's, but for the store line, the
// job's name and the tokens.
func TestDemo(t *testing.T) {
	want := tokens.ReplaceAllString(readmeOutput(t, "go run ./examples/cron"), "token N")
	_, want, _ = strings.Cut(want, "\n") // the store line
	forEachStore(t, func(t *testing.T, ctx context.Context, backend string) {
		job := uniqueJob(t)
		forgetJob(t, backend, job)
		var out, errs strings.Builder
		if err := cli(ctx, []string{"--backend", backend, "--job", job}, noEnv, &out, &errs); err != nil {
			t.Fatalf("cli: %v\n%s%s", err, out.String(), errs.String())
		}
		store, got, _ := strings.Cut(out.String(), "\n")
		if !strings.HasPrefix(store, "store: "+strings.SplitN(backend, ":", 2)[0]+":") {
			t.Errorf("the program says %q, not which store it used", store)
		}
		got = tokens.ReplaceAllString(strings.ReplaceAll(got, job+"@", "report@"), "token N")
		if got != want {
			t.Errorf("the program prints:\n%s\nREADME.md shows:\n%s", got, want)
		}
	})
}

// runs counts a job's runs per slot, and fails the test when a run starts
// in a slot that has had a successful one.
type runs struct {
	t    *testing.T
	mu   sync.Mutex
	ran  map[string]int
	done map[string]bool
}

func newRuns(t *testing.T) *runs {
	return &runs{t: t, ran: map[string]int{}, done: map[string]bool{}}
}

// job is a daily 02:00 job called name whose runs r counts; a run fails
// with fail, succeeds when fail is nil, and calls during (if not nil)
// before it ends.
func (r *runs) job(name string, fail error, during func(context.Context, Slot)) Job {
	return Job{Name: name, Schedule: daily, Run: func(ctx context.Context, slot Slot) error {
		r.mu.Lock()
		r.ran[slot.Name]++
		if r.done[slot.Name] {
			r.t.Errorf("%s ran again after a successful run in its slot", slot.Name)
		}
		r.mu.Unlock()
		if during != nil {
			during(ctx, slot)
		}
		if fail == nil {
			r.mu.Lock()
			r.done[slot.Name] = true
			r.mu.Unlock()
		}
		return fail
	}}
}

func (r *runs) count(slot string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ran[slot]
}

// simulate returns the controls of a test's simulated days: at sets the
// scheduler's clock to day1 plus d, instance makes an instance that fires
// on l by that clock.
func simulate(clock *memory.ManualClock, l lease.Locker) (at func(d time.Duration), instance func(id string) *Instance) {
	at = func(d time.Duration) { clock.Advance(day1.Add(d).Sub(clock.Now())) }
	instance = func(id string) *Instance { return &Instance{ID: id, Locker: l, Clock: clock} }
	return at, instance
}

// wantTaken fails t unless err says the slot is taken, by owner.
func wantTaken(t *testing.T, what string, err error, owner string) {
	t.Helper()
	var taken *lease.HeldError
	if !errors.As(err, &taken) || instanceOf(taken.Owner) != owner {
		t.Errorf("%s: got %v, want a *lease.HeldError naming %s", what, err, owner)
	}
}

// TestOncePerSlot drives the scheduler's clock through two days on every
// store: a slot runs once, whoever fires it and however late in the slot;
// its key lasts until the slot ends; a failed run releases the slot for a
// retry; the next slot runs again.
func TestOncePerSlot(t *testing.T) {
	forEachStore(t, func(t *testing.T, ctx context.Context, backend string) {
		l := open(t, ctx, backend)
		name := uniqueJob(t)
		forgetJob(t, backend, name)
		at, instance := simulate(memory.NewManualClock(day1), l)
		r := newRuns(t)
		slot1, slot2 := SlotName(name, day1), SlotName(name, day1.Add(24*time.Hour))

		// The first fire gets a context that ends with the test's but has
		// no deadline of its own, so the run's deadline is the slot's.
		long, cancel := context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		defer context.AfterFunc(ctx, cancel)()
		var deadline time.Duration
		err := instance("instance-1").Fire(long, r.job(name, nil, func(ctx context.Context, _ Slot) {
			d, _ := ctx.Deadline()
			deadline = time.Until(d)
		}))
		if err != nil {
			t.Fatalf("the first fire of the slot: %v", err)
		}
		// The run may last the slot, a little less, and no more.
		if deadline < 23*time.Hour || deadline > 24*time.Hour {
			t.Errorf("the run's context ends in %s, want a little less than the slot's 24h", deadline)
		}
		// The slot's key is kept until the slot ends: 24h from now, by the
		// store's clock, which is this machine's.
		held, err := l.Inspect(ctx, slot1)
		if err != nil {
			t.Fatalf("after a successful run: %v, want its slot still taken", err)
		}
		if left := time.Until(held.Expires); left < 24*time.Hour-time.Minute || left > 24*time.Hour+time.Minute {
			t.Errorf("the slot's key expires in %s, want about 24h", left)
		}
		if instanceOf(held.Owner) != "instance-1" {
			t.Errorf("the slot's key is held by %q, want instance-1's run", held.Owner)
		}

		at(400 * time.Millisecond)
		wantTaken(t, "a late timer", instance("instance-2").Fire(ctx, r.job(name, nil, nil)), "instance-1")
		at(12 * time.Hour)
		wantTaken(t, "a re-run that afternoon", instance("instance-3").Fire(ctx, r.job(name, nil, nil)), "instance-1")
		wantTaken(t, "a re-run on the instance that ran it", instance("instance-1").Fire(ctx, r.job(name, nil, nil)), "instance-1")
		at(24*time.Hour - time.Second)
		wantTaken(t, "a re-run in the slot's last second", instance("instance-2").Fire(ctx, r.job(name, nil, nil)), "instance-1")
		if n := r.count(slot1); n != 1 {
			t.Errorf("%s ran %d times, want once", slot1, n)
		}

		at(24 * time.Hour)
		broken := errors.New("mail server unreachable")
		if err := instance("instance-2").Fire(ctx, r.job(name, broken, nil)); !errors.Is(err, broken) {
			t.Fatalf("a failing run: got %v, want its error", err)
		}
		if _, err := l.Inspect(ctx, slot2); !errors.Is(err, lease.ErrNotHeld) {
			t.Errorf("after a failed run: %v, want its slot released (ErrNotHeld)", err)
		}
		at(24*time.Hour + time.Minute)
		if err := instance("instance-3").Fire(ctx, r.job(name, nil, nil)); err != nil {
			t.Fatalf("the retry after a failed run: %v", err)
		}
		at(30 * time.Hour)
		wantTaken(t, "a re-run after the retry", instance("instance-1").Fire(ctx, r.job(name, nil, nil)), "instance-3")
		if n := r.count(slot2); n != 2 {
			t.Errorf("%s ran %d times, want twice: the failed run and its retry", slot2, n)
		}
	})
}

// TestOneRunWhenAllFireAtOnce fires one slot on eight instances at the
// same moment, on every store: exactly one runs the job.
func TestOneRunWhenAllFireAtOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, ctx context.Context, backend string) {
		l := open(t, ctx, backend)
		name := uniqueJob(t)
		forgetJob(t, backend, name)
		clock := memory.NewManualClock(day1)
		r := newRuns(t)
		errs := make([]error, 8)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				in := &Instance{ID: "instance-" + string(rune('a'+i)), Locker: l, Clock: clock}
				errs[i] = in.Fire(ctx, r.job(name, nil, func(context.Context, Slot) { time.Sleep(10 * time.Millisecond) }))
			})
		}
		wg.Wait()
		ran := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ran++
			case !errors.Is(err, lease.ErrHeld):
				t.Errorf("fire: %v", err)
			}
		}
		if n := r.count(SlotName(name, day1)); ran != 1 || n != 1 {
			t.Errorf("%d fires ran the job %d times, %d succeeded; want one run", len(errs), n, ran)
		}
	})
}

// TestCrashedRunBlocksTheSlot: a run that dies (here, panics) leaves its
// slot taken, so the job does not run again by itself in that slot; an
// operator's force release lets the next fire run it; and a slot's key,
// crashed or done, lasts exactly until the slot ends, by the store's
// clock. The store and the scheduler share one clock the test moves.
func TestCrashedRunBlocksTheSlot(t *testing.T) {
	ctx := t.Context()
	clock := memory.NewManualClock(day1)
	store := memory.New(memory.WithClock(clock))
	defer store.Close()
	at, instance := simulate(clock, store)
	r := newRuns(t)
	slot1, slot2 := SlotName("report", day1), SlotName("report", day1.Add(24*time.Hour))

	crash := func(in *Instance) (recovered any) {
		defer func() { recovered = recover() }()
		_ = in.Fire(ctx, r.job("report", nil, func(context.Context, Slot) { panic("instance-1 dies") }))
		return nil
	}
	if crash(instance("instance-1")) == nil {
		t.Fatal("the run did not crash")
	}
	at(12 * time.Hour)
	wantTaken(t, "a re-run after the crash", instance("instance-2").Fire(ctx, r.job("report", nil, nil)), "instance-1")
	if n := r.count(slot1); n != 1 {
		t.Fatalf("%s ran %d times after a crash, want once (the crashed run)", slot1, n)
	}

	// The operator decides the job must run after all.
	if _, err := store.ForceRelease(ctx, slot1); err != nil {
		t.Fatal(err)
	}
	at(12*time.Hour + time.Minute)
	if err := instance("instance-2").Fire(ctx, r.job("report", nil, nil)); err != nil {
		t.Fatalf("a re-run after the operator freed the slot: %v", err)
	}

	// The successful run's key lasts to the slot's end and no longer.
	at(24*time.Hour - time.Millisecond)
	if _, err := store.Inspect(ctx, slot1); err != nil {
		t.Errorf("1ms before the slot ends: %v, want its key still held", err)
	}
	at(24 * time.Hour)
	if _, err := store.Inspect(ctx, slot1); !errors.Is(err, lease.ErrNotHeld) {
		t.Errorf("when the slot ends: %v, want its key gone (ErrNotHeld)", err)
	}

	// A crash in the next slot blocks it to its end, then the slot after
	// runs as usual.
	if crash(instance("instance-3")) == nil {
		t.Fatal("the run did not crash")
	}
	at(48*time.Hour - time.Millisecond)
	wantTaken(t, "a re-run at the end of the crashed slot", instance("instance-1").Fire(ctx, r.job("report", nil, nil)), "instance-3")
	if _, err := store.Inspect(ctx, slot2); err != nil {
		t.Errorf("1ms before the crashed slot ends: %v, want its key still held", err)
	}
	at(48 * time.Hour)
	if err := instance("instance-1").Fire(ctx, r.job("report", nil, nil)); err != nil {
		t.Errorf("the slot after a crashed one: %v", err)
	}
}

// TestSlot checks slot boundaries and names.
func TestSlot(t *testing.T) {
	paris := time.FixedZone("UTC+1", 3600)
	for _, c := range []struct {
		every      Every
		t          time.Time
		start, end string
	}{
		{daily, time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC), "2026-12-02T02:00Z", "2026-12-03T02:00Z"},
		{daily, time.Date(2026, 12, 2, 1, 59, 59, 999, time.UTC), "2026-12-01T02:00Z", "2026-12-02T02:00Z"},
		{daily, time.Date(2026, 12, 2, 23, 59, 0, 0, time.UTC), "2026-12-02T02:00Z", "2026-12-03T02:00Z"},
		{daily, time.Date(2026, 12, 2, 3, 30, 0, 0, paris), "2026-12-02T02:00Z", "2026-12-03T02:00Z"},
		{daily, time.Date(2027, 1, 1, 1, 0, 0, 0, time.UTC), "2026-12-31T02:00Z", "2027-01-01T02:00Z"},
		{Every{time.Hour, 15 * time.Minute}, time.Date(2026, 12, 2, 10, 14, 0, 0, time.UTC), "2026-12-02T09:15Z", "2026-12-02T10:15Z"},
		{Every{15 * time.Minute, 0}, time.Date(2026, 12, 2, 10, 44, 59, 0, time.UTC), "2026-12-02T10:30Z", "2026-12-02T10:45Z"},
	} {
		start, end := c.every.Slot(c.t)
		if got := SlotName("r", start); got != "r@"+c.start || SlotName("r", end) != "r@"+c.end {
			t.Errorf("%+v.Slot(%s) = %s, %s; want %s, %s", c.every, c.t, start, end, c.start, c.end)
		}
	}
	store := memory.New()
	defer store.Close()
	for _, bad := range []Every{{0, 0}, {90 * time.Second, 0}, {7 * time.Hour, 0}, {time.Hour, time.Hour}, {time.Hour, -time.Minute}, {time.Hour, 30 * time.Second}} {
		err := (&Instance{Locker: store}).Fire(t.Context(), Job{Name: "r", Schedule: bad, Run: func(context.Context, Slot) error { return nil }})
		if err == nil || !strings.Contains(err.Error(), "schedule") {
			t.Errorf("Fire with %+v: %v, want an error naming the schedule", bad, err)
		}
	}
}
