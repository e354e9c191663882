package conformance

import (
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/leasekit/lease"
)

// The lock model that a concurrent history must linearize to. Tenures
// last far longer than the history, so nothing expires in it.
type (
	lockState struct {
		holder string
		token  uint64
		max    uint64 // the largest token the name has had
	}
	lockOp    int
	lockInput struct {
		op    lockOp
		owner string
		token uint64
	}
	lockOutput struct {
		err   error // nil, ErrHeld, ErrLost or ErrNotHeld
		owner string
		token uint64
	}
)

const (
	opAcquire lockOp = iota
	opRenew
	opRelease
	opInspect
)

func (o lockOp) String() string {
	return [...]string{"Acquire", "Renew", "Release", "Inspect"}[o]
}

var lockModel = porcupine.Model{
	Init: func() interface{} { return lockState{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s, in, out := state.(lockState), input.(lockInput), output.(lockOutput)
		intact := s.holder != "" && s.holder == in.owner && s.token == in.token
		switch in.op {
		case opAcquire:
			switch {
			case out.err == lease.ErrHeld:
				return s.holder != "" && s.holder != in.owner && out.owner == s.holder, s
			case out.err != nil:
				return false, s
			case s.holder == "":
				return out.token > s.max, lockState{holder: in.owner, token: out.token, max: out.token}
			default:
				return s.holder == in.owner && out.token == s.token, s
			}
		case opRenew:
			if out.err == nil {
				return intact && out.token == s.token, s
			}
			return out.err == lease.ErrLost && !intact, s
		case opRelease:
			if out.err == nil {
				return intact, lockState{max: s.max}
			}
			return out.err == lease.ErrLost && !intact, s
		default:
			if out.err == nil {
				return s.holder != "" && out.owner == s.holder && out.token == s.token, s
			}
			return out.err == lease.ErrNotHeld && s.holder == "", s
		}
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(lockInput), output.(lockOutput)
		res := fmt.Sprintf("ok owner=%s token=%d", out.owner, out.token)
		if out.err != nil {
			res = out.err.Error()
		}
		return fmt.Sprintf("%s(owner=%s token=%d) -> %s", in.op, in.owner, in.token, res)
	},
	DescribeState: func(state interface{}) string {
		s := state.(lockState)
		return fmt.Sprintf("holder=%q token=%d max=%d", s.holder, s.token, s.max)
	},
}

// classify maps a Locker result to the model's outcomes; any other error
// fails the test, since a store that fails under this light load cannot be
// checked.
func classify(t testing.TB, op lockOp, l lease.Lease, err error) (lockOutput, bool) {
	for _, sentinel := range []error{lease.ErrHeld, lease.ErrLost, lease.ErrNotHeld} {
		if errors.Is(err, sentinel) {
			out := lockOutput{err: sentinel}
			var he *lease.HeldError
			if errors.As(err, &he) {
				out.owner = he.Owner
			}
			return out, true
		}
	}
	if ct, ok := t.(*caseT); ok && isStoreFailure(err) {
		// The history cannot be judged without this call's outcome.
		ct.noteStoreError("%s failed during the concurrent history: the store failed: %v", op, err)
		return lockOutput{}, false
	}
	if err != nil {
		t.Errorf("%s failed during the concurrent history: %v", op, err)
		return lockOutput{}, false
	}
	return lockOutput{owner: l.Owner, token: l.Token}, true
}

// historyLinearizable: history of concurrent acquire, renew, release and inspect is linearizable.
func historyLinearizable(t testing.TB, s *suite) {
	const clients, opsPerClient, rounds = 6, 40, 3
	lockers := []lease.Locker{s.locker(t), s.locker(t)}
	for round := 0; round < rounds; round++ {
		name := s.name(fmt.Sprintf("history-%d", round))
		base := time.Now()
		var (
			mu      sync.Mutex
			history []porcupine.Operation
			wg      sync.WaitGroup
		)
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(round*clients + c)))
				l := lockers[c%2]
				owner := fmt.Sprintf("owner-%d", c%3) // two clients share each owner
				var mine []lease.Lease
				for i := 0; i < opsPerClient; i++ {
					op := lockOp(rng.Intn(4))
					in := lockInput{op: op, owner: owner}
					var held lease.Lease
					if op == opRenew || op == opRelease {
						if len(mine) == 0 {
							op, in.op = opAcquire, opAcquire
						} else {
							held = mine[rng.Intn(len(mine))] // sometimes a stale one
							in.token = held.Token
						}
					}
					ctx := t.Context()
					call := time.Since(base).Nanoseconds()
					var (
						got lease.Lease
						err error
					)
					switch op {
					case opAcquire:
						got, err = l.Acquire(ctx, name, owner, long)
					case opRenew:
						got, err = l.Renew(ctx, held, long)
					case opRelease:
						err = l.Release(ctx, held)
					case opInspect:
						got, err = l.Inspect(ctx, name)
					}
					ret := time.Since(base).Nanoseconds()
					out, ok := classify(t, op, got, err)
					if !ok {
						return
					}
					if op == opAcquire && err == nil {
						mine = append(mine, got)
					}
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
					mu.Unlock()
				}
			}(c)
		}
		wg.Wait()
		if t.Failed() || storeFailed(t) {
			return
		}
		res, info := porcupine.CheckOperationsVerbose(lockModel, history, 30*time.Second)
		switch res {
		case porcupine.Illegal:
			t.Errorf("round %d: the history of %d operations on %q is not linearizable against a lock: two holders at once, a token that did not grow, or a stale owner's call that succeeded", round, len(history), name)
			for _, partial := range info.PartialLinearizationsOperations() {
				for _, ops := range partial {
					if len(ops) > 0 {
						last := ops[len(ops)-1]
						t.Logf("longest linearizable prefix ends %d operations in, at %s", len(ops), lockModel.DescribeOperation(last.Input, last.Output))
					}
				}
				break
			}
			t.FailNow()
		case porcupine.Unknown:
			t.Logf("round %d: the linearizability check timed out; history not judged", round)
		}
	}
}
