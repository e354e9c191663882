package testserver

import (
	"fmt"
	"net"
	"sync"
)

// handedOut remembers the ports this test binary has given to servers, so
// that two servers never get the same one, even after one stopped.
var handedOut sync.Map // int → struct{}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago and were never handed out before by this test binary. The kernel
// picks them (as for a listener on port 0), which on Linux keeps them
// apart from the ports it gives outgoing connections.
func freePorts(n int) ([]int, error) {
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("no free port after %d tries", tries)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		if _, dup := handedOut.LoadOrStore(port, struct{}{}); dup {
			continue
		}
		ports = append(ports, port)
	}
	return ports, nil
}

// loopback returns "127.0.0.1:port".
func loopback(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }
