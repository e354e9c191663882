// Package faultproxy is a TCP proxy that injects the faults a lease store
// meets on a bad day: stalls (a blackhole), delays, lost replies and
// resets. Tests, the conformance suite and `lease check` put it between a
// client and a store:
//
//	p, err := faultproxy.Start(ctx, "127.0.0.1:6379")  // or faultproxy.StartT(t, addr)
//	client := redis.NewClient(&redis.Options{Addr: p.Addr()})
//	p.Stall(faultproxy.Both)      // the store accepts but never answers
//	p.Clear()                     // healthy again
//
// Every fault can be switched on and off at any moment. A fault applies to
// the connections open at that moment and to those accepted later, and it
// is judged when a chunk of bytes is about to be delivered, so a chunk
// already read but not yet delivered obeys the newest setting:
//
//   - Stall(dir) forwards nothing in dir until cleared. Connections stay
//     open and no RST is sent; new connections are accepted (and dialled
//     to the target) but get no bytes. Nothing is lost: Clear delivers what
//     was held, as TCP does when a partition heals. Stall(Both) is a
//     blackhole.
//   - Delay(dir, d) delivers each chunk d after the proxy read it.
//   - LoseReplies(n, then) and LoseReplyTo(match, then) swallow the reply
//     to the next request(s) after the request reached the server, then
//     reset the connection or leave it silent: the server applied the
//     request, the client never sees the answer.
//   - Reset() resets every open connection now (RST to both sides).
//   - Refuse() closes the listener so that new connections are refused
//     (ECONNREFUSED) until Clear listens again on the same address.
//
// Stats counts connections, bytes each way, lost replies and round trips
// (turns of the conversation), for "round trips per operation" measured
// through the proxy.
//
// The package imports no testing code (StartT takes a small interface that
// *testing.T satisfies), so `lease check` and the exported conformance
// suite can use it. A Proxy is safe for concurrent use; Close ends every
// goroutine it started.
package faultproxy
