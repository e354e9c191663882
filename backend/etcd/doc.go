// Package etcdlease is a lease.Locker on etcd v3. The package lives in the
// directory backend/etcd but is named etcdlease so that it does not clash
// with etcd's own packages (clientv3, embed, ...) in the files that import
// both.
//
// # Data model
//
// A tenure of a name is one key, prefix+name (prefix defaults to "lease/",
// see WithPrefix), whose value is the owner, attached to an etcd lease
// with the tenure's TTL. The name is stored as its raw bytes (etcd keys
// are arbitrary bytes, and the Locker keeps no other keys under its
// prefix), so distinct names never collide and List is one prefix scan.
//
// The Token is the key's create revision: etcd's revision counter is
// cluster-wide and never goes back (unless the cluster's data is lost or
// rolled back: see "Restores and wiped data" below), so every new tenure
// of a name gets a larger Token than all earlier ones. A re-entrant Acquire, and a Renew
// that changes the TTL, rewrite the existing key, which keeps its create
// revision; other Renews only keep its etcd lease alive.
//
// Every operation on a tenure is owner-checked: every write is one
// transaction that compares the key's create revision (the Token) and
// value (the owner) before it changes anything, and a keep-alive counts
// only if a read after it finds the same tenure on the same lease. Unlike
// concurrency.Mutex.Unlock, which deletes its key unconditionally (etcd
// issue 22082), a Release or Renew that is retried, or comes from a holder
// that lost its tenure, can never touch a later tenure: it returns an
// error matching lease.ErrLost and changes nothing.
//
// # Time
//
// etcd judges expiry: the leader's lessor revokes an expired etcd lease,
// which deletes the key. It checks for expired leases about every 500ms,
// so a tenure can outlive its TTL by up to about half a second (plus a
// consensus round); until its key is deleted it is still held for
// Inspect and Acquire (Renew refuses it: etcd will not keep an expired
// lease alive).
//
// etcd leases have whole-second TTLs and a minimum of 1.5 election
// timeouts rounded up to whole seconds (2s with etcd's default 1s
// election timeout). A Locker asks for the ttl rounded up to whole
// seconds, and etcd may raise it to its minimum; the tenure never ends
// earlier than asked. A Lease's Deadline still comes from the requested
// ttl: lease.DeadlineFrom(start, ttl), with start read before the first
// request.
//
// etcd has no clock a client can read, so Expires is approximate on etcd.
// On a Lease returned by Acquire or Renew it is this process's clock
// before the first request plus the granted TTL: the earliest the tenure
// can end. Inspect, List and HeldError.Remaining ask etcd how long the
// tenure's lease has left; etcd answers in whole seconds, truncated, and
// the Locker adds half a second, so they are within half a second of the
// truth, translated to this process's clock.
//
// # Round trips
//
//	Acquire, free name or new tenure    2  (LeaseGrant, Txn)
//	Acquire, re-entrant                 3  (LeaseGrant, Txn, LeaseRevoke* of the old lease)
//	Acquire, held by another owner      4  (LeaseGrant, Txn, LeaseTimeToLive, LeaseRevoke*)
//	Renew, same ttl                     3  (Txn read, LeaseKeepAlive, Txn read); no write
//	Renew, another ttl                  5  (Txn read, LeaseKeepAlive, LeaseGrant, Txn, LeaseRevoke*)
//	Renew of a lost tenure              1  (Txn read); 3 if its lease expired just before
//	Release                             2  (Txn, LeaseRevoke*)
//	Release of a lost tenure            1  (Txn)
//	Inspect                             2  (Range, LeaseTimeToLive); 1 when free
//	List                                1 + one LeaseTimeToLive per tenure
//	ForceRelease                        3  (DeleteRange, LeaseTimeToLive, LeaseRevoke*)
//
// A LeaseRevoke marked * is sent after the call has its answer, in the
// background: the call returns without waiting for it, so a cluster that
// stops answering after the decisive request cannot hold a call past its
// context. Each such revocation is bounded by two seconds, and Close waits
// for the ones under way, so none outlives the Locker.
//
// Renew keeps the tenure's etcd lease alive between two owner-checked
// reads, so a holder that renews with the ttl it acquired with (as
// lease.Run does) writes nothing to etcd's log. etcd refuses to keep an
// expired lease alive, so Renew never revives an expired tenure. A
// keep-alive restarts a lease with the TTL it was granted, so a Renew
// with a ttl that needs another TTL moves the key onto a new etcd lease.
// No etcd lease outlives its tenure: Release, Renew and re-entrant
// Acquire revoke the lease they leave behind, and a refused Acquire or
// Renew revokes the one it granted (in the background, see above). The exceptions are failures without
// an answer, where the etcd lease concerned is left to expire after its
// TTL: revoking a lease that a lost Acquire or Renew may have attached
// could end a tenure whose holder still trusts its Deadline, and it is a
// Release's reply that names the lease to revoke.
//
// # Errors
//
// A failure of the cluster or the network (no leader, unreachable
// endpoints, a lost reply) or of the context is returned wrapped, with the
// operation and name, and never matches lease.ErrHeld, lease.ErrLost or
// lease.ErrNotHeld. Like every etcd client call, the Locker's calls wait
// for an unreachable cluster for as long as their context allows: give
// them a deadline. Every call returns by the time its context ends.
//
// # Lost replies
//
// etcd's client (clientv3) resends a request on its own in two cases
// only. Requests that change nothing, or that are harmless to repeat
// (Range, LeaseGrant, LeaseRevoke, LeaseTimeToLive), it resends when they
// fail as unavailable. A write (Txn, Put, DeleteRange) it resends only
// when it cannot have been applied: no connection was there to send it on
// ("there is no connection available"), or the server refused it before
// applying it (an expired auth token, a learner member); or when it failed
// as canceled or timed out while the caller's context was still live,
// which a request the server received cannot do: the server's deadline is
// the caller's remaining time counted from the request's arrival, never
// earlier than the caller's, and etcd reports its own timeouts as
// unavailable. A write whose reply is lost in the network (a reset, a
// dropped connection) fails with codes.Unavailable and is not resent
// (client/v3 retry.go and retry_interceptor.go, v3.7).
//
// So the outcome of every call is exact: a Release whose reply was lost
// returns a store error, never lease.ErrLost, although etcd may have
// applied it; a resend that found the tenure gone would report ErrLost,
// and none happens. The tenure may then have ended or not: a caller that
// retries such a Release gets ErrLost if the first attempt had ended it
// (lease.Run does not retry: it reports the store error, and the tenure
// expires on its own if it was not released). An Acquire or Renew whose
// reply was lost is safe to retry with the same owner: a re-entrant
// Acquire keeps the Token.
//
// # Restores and wiped data
//
// Tokens are etcd revisions, which live in the cluster's data. If that
// data is lost and the cluster is created again empty (every member's
// data directory wiped), revisions, and so tokens, start again from 1;
// restoring a snapshot (etcdutl snapshot restore) takes them back to the
// snapshot's revision, so tokens issued since the snapshot are issued
// again, unless the restore is given --bump-revision greater than the
// number of revisions made since the snapshot (with --mark-compacted), as
// Kubernetes operators do for the same reason. Either way the tenures
// themselves are lost, as in a Redis failover, so two holders may briefly
// both believe they hold a lease; a fenced system that refuses tokens
// smaller than the largest it has seen then refuses the new holders'
// writes (safe, but the work stops) until their tokens pass the old ones,
// or until its high-water mark is reset.
//
// The Locker does not floor its tokens against this. A floor must outlive
// the data it protects, and etcd offers nothing outside its data: a floor
// kept in a key is wiped with it, etcd has no clock a client could read
// (the Redis backend floors its tokens with the server's TIME), and a
// floor from this process's clock would make tokens depend on skewed
// application clocks, which the contract rules out. It would also part the
// Token from the create revision that every owner-checked transaction
// compares, costing round trips.
//
// # URLs
//
// Importing the package registers the "etcd" scheme with lease.Open:
//
//	etcd://[user:password@]host:port[,host:port...][?prefix=P&dial_timeout=D]
//
// The user and password, if given, are etcd's authentication. The query
// parameters are:
//
//	prefix        the key prefix (default "lease/"); must not be empty
//	dial_timeout  how long Open waits for the cluster to answer, a Go
//	              duration such as 5s (default 5s)
//
// Any other parameter is an error. Open checks that the cluster answers
// (one linearizable read) within dial_timeout and its context, so an
// unreachable cluster, or one without a leader, fails Open rather than the
// first call. The Locker that Open returns owns its client and closes it
// on Close; one made by New with the caller's client never closes it. For
// TLS, or any other client setting, make the clientv3.Client yourself and
// use New.
package etcdlease
