package jstest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreePort is a TCP port on 127.0.0.1 that nothing listens on, for a
// server a test stops and starts again on the same port (a cluster node,
// an engine's NATS listener).
//
// It is drawn from below the kernel's ephemeral range: a port from
// `Listen(":0")` is an ephemeral one, and while its server is down any
// outgoing connection on the machine may take it as its local port, so
// the restart cannot listen there (a cluster node then never becomes
// ready).
func FreePort(tb testing.TB) int {
	tb.Helper()
	low := ephemeralLow()
	const floor = 10000
	if low <= floor+1000 {
		low = 65535 // no room below it: draw from the whole range above the floor
	}
	for range 1000 {
		p := floor + rand.IntN(low-floor)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		l.Close()
		return p
	}
	tb.Fatal("no free port below the ephemeral range")
	return 0
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux;
// IANA's 49152 elsewhere).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 0 {
				return n
			}
		}
	}
	return 49152
}
