package lease

import (
	"testing"
	"time"
)

// TestChunksKeepSharedExpiriesTogether: the calls of a sweep never split
// leases that share an Expires (the tenures of one etcd group), stretching
// a call up to twice maxBatch or cutting before them.
func TestChunksKeepSharedExpiriesTogether(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	job := func(expires time.Time) *renewJob {
		return &renewJob{h: &holding{l: Lease{Expires: expires}}}
	}
	runs := func(sizes ...int) []*renewJob {
		var out []*renewJob
		for i, n := range sizes {
			for range n {
				out = append(out, job(base.Add(time.Duration(i)*time.Millisecond)))
			}
		}
		return out
	}
	for _, c := range []struct {
		name  string
		sizes []int
	}{
		{"one run of each lease", []int{1, 1, 1}},
		{"a run across the first boundary", []int{450, 120, 500}},
		{"a run longer than a stretched call", []int{300, 900, 10}},
		{"runs of a call's results", []int{1000, 1000, 700}},
	} {
		due := runs(c.sizes...)
		chunks := chunks(due)
		seen := 0
		for i, ch := range chunks {
			if len(ch) > 2*maxBatch {
				t.Fatalf("%s: call %d has %d leases; want at most %d", c.name, i, len(ch), 2*maxBatch)
			}
			seen += len(ch)
			if i > 0 {
				prev := chunks[i-1]
				if prev[len(prev)-1].h.get().Expires.Equal(ch[0].h.get().Expires) {
					t.Fatalf("%s: calls %d and %d split the leases expiring at %v", c.name, i-1, i, ch[0].h.get().Expires)
				}
			}
		}
		if seen != len(due) {
			t.Fatalf("%s: the calls carry %d leases of %d", c.name, seen, len(due))
		}
	}
}
