// Package etcdfence checks fencing tokens in etcd, inside the transaction
// that makes the guarded write, so that the check and the write commit
// together.
//
//	f, err := etcdfence.New(client)
//	...
//	_, err = f.Do(ctx, l.Name, l.Token, clientv3.OpPut("/reports/42", body))
//	if errors.Is(err, fence.ErrStale) {
//		// a newer holder has written: nothing was changed
//	}
//
// Do runs one transaction: the fence's comparison in If, the fence's ops
// and yours in Then, a read of the fence in Else. Guard gives the same
// comparison and ops for a transaction of your own, with comparisons of
// your own beside them; Refused then tells whether the fence was why it
// failed. Check is Do with no ops, for fence.Middleware.
//
// # Keys
//
// A name's fence is one key,
//
//	<prefix><hex(sha256(name))>/<token, 20 digits>     value: the full name
//
// The keys of one name sort by token, so the check is a single
// clientv3.Cmp, true when no key from the next token up exists (a range
// comparison of CreateRevision with 0, which also holds when the name has
// no fence yet: etcd cannot compare the value of a missing key). Accepting
// a token puts its key and deletes the keys below it, so a name keeps one
// key. The digest keeps names of any bytes (1024 of them, NUL, '/') to a
// fixed-length key that no other name's range can overlap.
//
// # Cost
//
// A guarded write is one Txn where the unguarded write is one Put: one
// round trip either way, accepted or refused, since the Else branch reads
// the winning token in the same transaction (Refused reads it with one
// more Range only when a transaction of your own has no Read in Else). The
// accepted write also deletes the name's previous fence key in the same
// revision. TestRoundTrips counts the requests; BenchmarkWrite measures
// the time.
package etcdfence
