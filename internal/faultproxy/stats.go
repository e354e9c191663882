package faultproxy

// Stats are the proxy's counters since Start. Take one before and one
// after an operation and Sub them to count what the operation did.
type Stats struct {
	// Accepted is how many client connections the proxy accepted.
	Accepted int64
	// Open is how many client connections are open now (a gauge, which
	// Sub keeps from the later Stats).
	Open int64
	// DialFailures is how many accepted connections could not be
	// forwarded because the target did not accept a connection.
	DialFailures int64
	// BytesToServer and BytesToClient are the bytes delivered each way
	// (bytes held by a stall or lost with a reply are not counted).
	BytesToServer, BytesToClient int64
	// RoundTrips counts turns of the conversation: each time a client
	// starts sending on a connection after the server last sent on it
	// (or for the first time on that connection). For a request/reply
	// protocol whose client waits for each reply (Redis, PostgreSQL,
	// MySQL), it is the number of round trips the client waited for.
	//
	// Its limits: it is counted when the proxy reads a request, so
	// connection set-up (the PostgreSQL startup exchange, AUTH, HELLO,
	// TLS) counts too, unless the pool is warmed first; requests
	// pipelined without waiting count once; and bytes a server sends on
	// its own (gRPC/HTTP/2 pings and window updates, as etcd's client
	// exchanges, pub/sub pushes, PostgreSQL notices) add turns. For etcd
	// it is an upper bound, not an RPC count.
	RoundTrips int64
	// LostReplies is how many replies LoseReplies and LoseReplyTo
	// swallowed.
	LostReplies int64
}

// Stats returns the counters now.
func (p *Proxy) Stats() Stats {
	return Stats{
		Accepted:      p.accepted.Load(),
		Open:          p.open.Load(),
		DialFailures:  p.dialFailures.Load(),
		BytesToServer: p.bytesToServer.Load(),
		BytesToClient: p.bytesToClient.Load(),
		RoundTrips:    p.roundTrips.Load(),
		LostReplies:   p.lostReplies.Load(),
	}
}

// Sub returns the counters s minus before, for what happened between the
// two; Open is s's.
func (s Stats) Sub(before Stats) Stats {
	return Stats{
		Accepted:      s.Accepted - before.Accepted,
		Open:          s.Open,
		DialFailures:  s.DialFailures - before.DialFailures,
		BytesToServer: s.BytesToServer - before.BytesToServer,
		BytesToClient: s.BytesToClient - before.BytesToClient,
		RoundTrips:    s.RoundTrips - before.RoundTrips,
		LostReplies:   s.LostReplies - before.LostReplies,
	}
}
