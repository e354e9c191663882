package lease

import (
	"reflect"
	"sync"
)

// Waiters of one process queue locally. When several callers of Run in
// one process wait for the same name on the same Locker, only the first
// of them (the head) tries the store: when the name's release wakes them,
// one Acquire follows instead of one per waiter, and within the process
// the name goes to its waiters in arrival order. When the head returns,
// having acquired the name or given up, the next waiter becomes the head;
// it tries at once if the head gave up (the name may be free), and waits
// for the next release if the head acquired. Waiters in other processes
// are not held back: across processes, the store decides.

// localKey names one queue: a Locker and a name.
type localKey struct {
	l    Locker
	name string
}

// localQueue is the waiters of one name on one Locker, head first.
type localQueue struct{ turns []*localTurn }

// localTurn is one waiter's place. ready receives once, when the waiter
// becomes the head: whether the head before it acquired the name.
type localTurn struct {
	key   localKey
	ready chan bool
}

var (
	localMu     sync.Mutex
	localQueues = map[localKey]*localQueue{}
)

// joinLocal puts a waiter at the back of the queue of name on l and says
// whether it is the head. It returns nil when l cannot be a map key (a
// Locker whose dynamic type is not comparable): such waiters do not
// queue.
func joinLocal(l Locker, name string) (t *localTurn, head bool) {
	if !reflect.TypeOf(l).Comparable() {
		return nil, true
	}
	k := localKey{l, name}
	t = &localTurn{key: k, ready: make(chan bool, 1)}
	localMu.Lock()
	defer localMu.Unlock()
	q := localQueues[k]
	if q == nil {
		q = &localQueue{}
		localQueues[k] = q
	}
	q.turns = append(q.turns, t)
	return t, len(q.turns) == 1
}

// leave takes t out of its queue. When t was the head, the next waiter
// becomes the head and learns whether t acquired the name.
func (t *localTurn) leave(acquired bool) {
	localMu.Lock()
	defer localMu.Unlock()
	q := localQueues[t.key]
	if q == nil {
		return
	}
	for i, o := range q.turns {
		if o != t {
			continue
		}
		q.turns = append(q.turns[:i], q.turns[i+1:]...)
		if i == 0 && len(q.turns) > 0 {
			q.turns[0].ready <- acquired
		}
		break
	}
	if len(q.turns) == 0 {
		delete(localQueues, t.key)
	}
}
