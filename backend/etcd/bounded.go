package etcdlease

import "sync"

// bounded is a map that a Locker uses to remember what it may forget
// (the waiters' marks): safe for concurrent use, and holding at most
// max entries; past that, putting a new key drops an arbitrary one.
type bounded[K comparable, V any] struct {
	mu  sync.Mutex
	m   map[K]V
	max int
}

func (b *bounded[K, V]) get(k K) (V, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.m[k]
	return v, ok
}

func (b *bounded[K, V]) put(k K, v V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[K]V{}
	}
	if _, ok := b.m[k]; !ok && len(b.m) >= b.max {
		for old := range b.m {
			delete(b.m, old)
			break
		}
	}
	b.m[k] = v
}

// change applies f to k's value, if k is there.
func (b *bounded[K, V]) change(k K, f func(V) V) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.m[k]; ok {
		b.m[k] = f(v)
	}
}

func (b *bounded[K, V]) forget(k K) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, k)
}
