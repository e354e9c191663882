package etcdfence

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leasekit/lease"
	"github.com/leasekit/lease/fence"
)

// DefaultPrefix is the key prefix of a Fence made without WithPrefix.
const DefaultPrefix = "lease-fence/"

// Fence keeps fences in etcd, one small key per lease name, and checks
// writes against them inside etcd transactions. It is safe for concurrent
// use and never closes its client.
type Fence struct {
	kv     clientv3.KV
	prefix string
}

var _ fence.Checker = (*Fence)(nil)

// Option configures New.
type Option func(*Fence)

// WithPrefix puts prefix before every fence key (DefaultPrefix,
// "lease-fence/", by default). It must not be empty.
func WithPrefix(prefix string) Option { return func(f *Fence) { f.prefix = prefix } }

// New returns a Fence on kv: a *clientv3.Client, or its KV, or a
// namespaced KV (namespace.NewKV).
func New(kv clientv3.KV, opts ...Option) (*Fence, error) {
	if kv == nil {
		return nil, fmt.Errorf("fence/etcd: %w: nil KV", lease.ErrInvalid)
	}
	f := &Fence{kv: kv, prefix: DefaultPrefix}
	for _, o := range opts {
		o(f)
	}
	if f.prefix == "" {
		return nil, fmt.Errorf("fence/etcd: %w: empty key prefix", lease.ErrInvalid)
	}
	return f, nil
}

// Keys: the fence of a name is the one key
//
//	<prefix><hex(sha256(name))>/<token, 20 decimal digits>
//
// holding the full name as its value. Keys sort by token, so "no token
// larger than t was accepted" is one comparison over a key range: no key
// from .../<t+1> to the end of the name's range exists. Accepting t puts
// .../<t> and deletes the keys below it, so a name keeps one key.

// tokenWidth is the width of a token in a key: every uint64 fits.
const tokenWidth = 20

func (f *Fence) base(name string) string {
	sum := sha256.Sum256([]byte(name))
	return f.prefix + hex.EncodeToString(sum[:]) + "/"
}

func tokenKey(base string, token uint64) string {
	s := strconv.FormatUint(token, 10)
	return base + strings.Repeat("0", tokenWidth-len(s)) + s
}

// rangeEnd is the end of the range of every key under base, which ends
// in '/': '0' is the byte after it.
func rangeEnd(base string) string { return base[:len(base)-1] + "0" }

// Guard is the fence check of one write to put in your own etcd
// transaction:
//
//	g, err := f.Guard(l.Name, l.Token)
//	...
//	resp, err := client.Txn(ctx).
//		If(g.Cmp /* and your own comparisons */).
//		Then(append(g.Ops, clientv3.OpPut("/reports/42", body))...).
//		Else(g.Read).
//		Commit()
//	if err == nil && !resp.Succeeded {
//		err = f.Refused(ctx, g, resp) // *fence.StaleError, or nil if your comparison failed
//	}
//
// Cmp holds exactly when the token is accepted; Ops, in Then, raise the
// name's maximum to the token; Read, in Else, reads the maximum so that
// Refused can name the winning token from the same response. Without Read
// in Else, Refused spends one more round trip to read it.
type Guard struct {
	// Cmp is true when no token larger than the Guard's was accepted for
	// its name: no fence key from the next token up exists.
	Cmp clientv3.Cmp
	// Ops record the token as accepted: put its fence key and delete the
	// keys of smaller tokens.
	Ops []clientv3.Op
	// Read gets the name's fence key, the largest first.
	Read clientv3.Op

	name  string
	token uint64
	base  string
}

// Guard returns the comparison and operations that fence a write tagged
// (name, token) inside an etcd transaction (see the type). The error
// matches lease.ErrInvalid when name or token is invalid (fence.Validate).
func (f *Fence) Guard(name string, token uint64) (Guard, error) {
	if err := fence.Validate(name, token); err != nil {
		return Guard{}, err
	}
	base := f.base(name)
	end := rangeEnd(base)
	own := tokenKey(base, token)
	return Guard{
		Cmp: clientv3.Compare(clientv3.CreateRevision(tokenKey(base, token+1)).WithRange(end), "=", 0),
		Ops: []clientv3.Op{
			clientv3.OpDelete(base, clientv3.WithRange(own)),
			clientv3.OpPut(own, name),
		},
		Read:  clientv3.OpGet(base, clientv3.WithRange(end), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1)),
		name:  name,
		token: token,
		base:  base,
	}, nil
}

// Refused explains a transaction that did not succeed: it returns a
// *fence.StaleError (matching fence.ErrStale) when g's fence refused it,
// and nil when g's token was not stale (another comparison of the
// transaction failed) or the transaction succeeded. It reads the maximum
// from g.Read's answer in resp's Else branch when there is one, and
// otherwise with one more request to etcd.
func (f *Fence) Refused(ctx context.Context, g Guard, resp *clientv3.TxnResponse) error {
	if resp == nil || resp.Succeeded {
		return nil
	}
	end := rangeEnd(g.base)
	for _, r := range resp.Responses {
		rr := r.GetResponseRange()
		if rr == nil {
			continue
		}
		for _, kv := range rr.Kvs {
			if k := string(kv.Key); k >= g.base && k < end {
				return g.verdict(k)
			}
		}
	}
	got, err := f.kv.Get(ctx, g.base, clientv3.WithRange(end), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		return fmt.Errorf("fence/etcd: reading the fence of %q: %w", g.name, err)
	}
	if len(got.Kvs) == 0 {
		return nil
	}
	return g.verdict(string(got.Kvs[0].Key))
}

// verdict reads the largest token from a fence key of g's name.
func (g Guard) verdict(key string) error {
	max, err := strconv.ParseUint(key[len(g.base):], 10, 64)
	if err != nil {
		return fmt.Errorf("fence/etcd: fence key %q of %q does not end in a token", key, g.name)
	}
	if max <= g.token {
		return nil
	}
	return &fence.StaleError{Name: g.name, Token: g.token, Max: max}
}

// Do makes ops, in one transaction, if token is accepted for name: the
// fence check, the ops and the raise of the maximum commit together, in
// one round trip, accepted or refused. It returns the transaction's
// response when accepted (ops' answers follow the fence's two in
// resp.Responses), and an error matching fence.ErrStale, a
// *fence.StaleError naming the winning token, when refused, with nothing
// changed. The ops must not touch the fence's keys (etcd refuses a
// transaction that puts and deletes one key). For comparisons of your
// own, build the transaction with Guard.
func (f *Fence) Do(ctx context.Context, name string, token uint64, ops ...clientv3.Op) (*clientv3.TxnResponse, error) {
	g, err := f.Guard(name, token)
	if err != nil {
		return nil, err
	}
	resp, err := f.kv.Txn(ctx).If(g.Cmp).Then(append(g.Ops, ops...)...).Else(g.Read).Commit()
	if err != nil {
		return nil, fmt.Errorf("fence/etcd: guarded write for %q: %w", name, err)
	}
	if resp.Succeeded {
		return resp, nil
	}
	if err := f.Refused(ctx, g, resp); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("fence/etcd: guarded write for %q: the transaction failed, yet no fence key above token %d was found", name, token)
}

// Check checks and raises the fence of name, with no write (see
// fence.Checker), for fence.Middleware: Do with no ops, one round trip.
// It is not atomic with any write: use Do or Guard for that.
func (f *Fence) Check(ctx context.Context, name string, token uint64) error {
	_, err := f.Do(ctx, name, token)
	return err
}
