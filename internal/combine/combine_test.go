package combine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lanesHeld starts q.Lanes calls whose lone requests block until release
// is closed, one after the other (calls that arrive together may share a
// batch), and waits until they all have begun.
func lanesHeld(t *testing.T, q *Queue[int, int], release chan struct{}) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	began := make(chan struct{}, q.Lanes)
	for i := range q.Lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = q.Do(context.Background(), -1-i, func(context.Context, int) (int, error) {
				began <- struct{}{}
				<-release
				return 0, nil
			}, nil)
		}()
		select {
		case <-began:
		case <-time.After(10 * time.Second):
			t.Fatal("the lanes' calls never began")
		}
	}
	return &wg
}

func waitFor(t *testing.T, q *Queue[int, int], n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); q.Waiting() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait; want %d", q.Waiting(), n)
		}
	}
}

// TestLoneCallGoesAlone: with a lane free and nobody waiting, Do answers
// with alone and never batches.
func TestLoneCallGoesAlone(t *testing.T) {
	q := &Queue[int, int]{Lanes: 2, Max: 8, What: "requests"}
	for i := range 5 {
		got, err := q.Do(context.Background(), i,
			func(_ context.Context, r int) (int, error) { return r * 10, nil },
			func(context.Context, []int) ([]int, []error) { t.Fatal("a lone call was batched"); return nil, nil })
		if err != nil || got != i*10 {
			t.Fatalf("Do(%d) = %d, %v; want %d", i, got, err, i*10)
		}
	}
}

// TestWaitingCallsShareABatch: calls that arrive while the lanes are busy
// go out in batches of at most Max, oldest first, and each gets its own
// answer or error.
func TestWaitingCallsShareABatch(t *testing.T) {
	q := &Queue[int, int]{Lanes: 2, Max: 4, What: "requests"}
	release := make(chan struct{})
	lanes := lanesHeld(t, q, release)
	var mu sync.Mutex
	var batches [][]int
	batch := func(_ context.Context, reqs []int) ([]int, []error) {
		mu.Lock()
		batches = append(batches, append([]int(nil), reqs...))
		mu.Unlock()
		res, errs := make([]int, len(reqs)), make([]error, len(reqs))
		for i, r := range reqs {
			if r == 3 {
				errs[i] = errors.New("three fails")
			}
			res[i] = r * 10
		}
		return res, errs
	}
	const n = 10
	var wg sync.WaitGroup
	got := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = q.Do(context.Background(), i, func(context.Context, int) (int, error) { return 0, errors.New("sent alone") }, batch)
		}()
		waitFor(t, q, i+1) // queued in order
	}
	close(release)
	wg.Wait()
	lanes.Wait()
	for i := range n {
		switch {
		case i == 3 && (errs[i] == nil || errs[i].Error() != "three fails"):
			t.Errorf("call 3: %d, %v; want its own error", got[i], errs[i])
		case i != 3 && (errs[i] != nil || got[i] != i*10):
			t.Errorf("call %d: %d, %v; want %d", i, got[i], errs[i], i*10)
		}
	}
	// Batches run concurrently, so they are recorded in any order; each
	// takes the oldest waiting calls, so in order of their first calls
	// they hold every call once, in order.
	slices.SortFunc(batches, func(a, b []int) int { return a[0] - b[0] })
	var all []int
	for _, b := range batches {
		if len(b) > q.Max {
			t.Errorf("a batch of %d; Max is %d", len(b), q.Max)
		}
		all = append(all, b...)
	}
	for i, r := range all {
		if r != i {
			t.Fatalf("batches %v: not every call once, oldest first", batches)
		}
	}
	if len(all) != n || len(batches) != 3 {
		t.Errorf("batches %v; want %d calls in 3 batches", batches, n)
	}
}

// TestWaitingCallEndsWithItsContext: a waiting call whose context ends
// returns at once, says what it waited for, and is never sent.
func TestWaitingCallEndsWithItsContext(t *testing.T) {
	q := &Queue[int, int]{Lanes: 1, Max: 4, What: "renewals"}
	release := make(chan struct{})
	lanes := lanesHeld(t, q, release)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	sent := false
	_, err := q.Do(ctx, 7, nil, func(context.Context, []int) ([]int, []error) { sent = true; return []int{0}, nil })
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "waiting for one of the 1 renewals under way") {
		t.Errorf("Do past its deadline while waiting: %v", err)
	}
	if q.Waiting() != 0 {
		t.Errorf("%d calls still wait", q.Waiting())
	}
	close(release)
	lanes.Wait()
	if sent {
		t.Error("the call that gave up was sent")
	}
}

// TestShortBatchAnswer: a batch that answers fewer requests than it was
// given fails the unanswered calls instead of leaving them a zero answer.
func TestShortBatchAnswer(t *testing.T) {
	q := &Queue[int, int]{Lanes: 1, Max: 4, What: "requests"}
	release := make(chan struct{})
	lanes := lanesHeld(t, q, release)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = q.Do(context.Background(), i, nil, func(_ context.Context, reqs []int) ([]int, []error) { return []int{1}, nil })
		}()
		waitFor(t, q, i+1)
	}
	close(release)
	wg.Wait()
	lanes.Wait()
	if errs[0] != nil || errs[1] == nil {
		t.Errorf("errors %v; want the first answered and the second failed", errs)
	}
}

// TestKeyKeepsOneCallPerKeyInABatch: with Key set, a batch carries no two
// calls of one key; the later ones go in the next batch, still oldest
// first, and every call is answered.
func TestKeyKeepsOneCallPerKeyInABatch(t *testing.T) {
	q := &Queue[int, int]{Lanes: 1, Max: 8, What: "requests", Key: func(r int) string { return string(rune('a' + r%3)) }}
	release := make(chan struct{})
	lanes := lanesHeld(t, q, release)
	var mu sync.Mutex
	var batches [][]int
	batch := func(_ context.Context, reqs []int) ([]int, []error) {
		mu.Lock()
		batches = append(batches, slices.Clone(reqs))
		mu.Unlock()
		res := make([]int, len(reqs))
		for i, r := range reqs {
			res[i] = r * 10
		}
		return res, nil
	}
	// Keys a b c a b a: three distinct, then two, then one.
	reqs := []int{0, 1, 2, 3, 4, 6}
	var wg sync.WaitGroup
	got := make([]int, len(reqs))
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = q.Do(context.Background(), r, nil, batch)
		}()
		waitFor(t, q, i+1)
	}
	close(release)
	wg.Wait()
	lanes.Wait()
	for i, r := range reqs {
		if errs[i] != nil || got[i] != r*10 {
			t.Errorf("call %d: %d, %v; want %d", r, got[i], errs[i], r*10)
		}
	}
	want := [][]int{{0, 1, 2}, {3, 4}, {6}}
	if !slices.EqualFunc(batches, want, slices.Equal[[]int]) {
		t.Errorf("batches %v; want %v", batches, want)
	}
}

// TestTurnsAreSharedWithOtherCode: with Turns set, a turn taken by
// sending on the channel outside the queue is a lane in use, so calls
// wait while every turn is taken and share a batch once one is given
// back.
func TestTurnsAreSharedWithOtherCode(t *testing.T) {
	turns := make(chan struct{}, 2)
	q := &Queue[int, int]{Lanes: 5, Max: 8, What: "requests", Turns: turns}
	alone := func(_ context.Context, r int) (int, error) { return r, nil }
	if got, err := q.Do(context.Background(), 7, alone, nil); err != nil || got != 7 {
		t.Fatalf("lone call: %d, %v", got, err)
	}
	turns <- struct{}{}
	turns <- struct{}{}
	var batches atomic.Int32
	batch := func(_ context.Context, reqs []int) ([]int, []error) {
		batches.Add(1)
		return slices.Clone(reqs), nil
	}
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, err := q.Do(context.Background(), i, alone, batch); err != nil || got != i {
				t.Errorf("call %d: %d, %v", i, got, err)
			}
		}()
		waitFor(t, q, i+1)
	}
	<-turns
	wg.Wait()
	<-turns
	if n := batches.Load(); n != 1 {
		t.Errorf("%d batches for 3 calls that waited for a turn; want 1", n)
	}
}
