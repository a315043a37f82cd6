package web

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// CodeLiveFeeds is the code of a live feed refused for the bounds
// (Explorer.MaxFeeds and the others), answered 503 with Retry-After.
const CodeLiveFeeds = "limit.live_feeds"

// Reasons a live feed is refused (FeedStats).
const (
	FeedsFull      = "total"     // MaxFeeds are open
	FeedsAnonymous = "anonymous" // the feeds of readers not signed in fill what is not reserved
	FeedsNetwork   = "network"   // the client's network has MaxFeedsPerNetwork
)

// feedCount is the live feeds open.
type feedCount struct {
	mu           sync.Mutex
	open, anon   int
	perNet       map[string]int
	refused      [3]atomic.Uint64 // by reason: total, anonymous, network
	lastRefused  atomic.Int64     // unix nanoseconds
	openSignedIn int
}

// FeedStats are the live feeds open and refused.
type FeedStats struct {
	Open, SignedIn, Max int
	// Refused counts the feeds refused since the start, by reason
	// (FeedsFull, FeedsAnonymous, FeedsNetwork).
	Refused map[string]uint64
	// LastRefused is when a feed was last refused (zero: never).
	LastRefused time.Time
}

// FeedStats returns the live feeds' counts.
func (e *Explorer) FeedStats() FeedStats {
	f := &e.feeds
	f.mu.Lock()
	st := FeedStats{Open: f.open, SignedIn: f.openSignedIn, Max: e.MaxFeeds}
	f.mu.Unlock()
	st.Refused = map[string]uint64{FeedsFull: f.refused[0].Load(), FeedsAnonymous: f.refused[1].Load(), FeedsNetwork: f.refused[2].Load()}
	if t := f.lastRefused.Load(); t != 0 {
		st.LastRefused = time.Unix(0, t)
	}
	return st
}

// ClientNetwork is the network a request's client is counted in: the /24
// of an IPv4 address, the /64 of an IPv6 one (the host of the remote
// address as it is when it is neither).
func ClientNetwork(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return host
	case ip.To4() != nil:
		return (&net.IPNet{IP: ip.To4().Mask(net.CIDRMask(24, 32)), Mask: net.CIDRMask(24, 32)}).String()
	}
	return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
}

// admitFeed takes a place for a live feed of r, or says why there is none
// (the reason, and the message of the refusal).
func (e *Explorer) admitFeed(r *http.Request) (release func(), reason, msg string) {
	signed := e.SignedIn != nil && e.SignedIn(r)
	network := ClientNetwork(r.RemoteAddr)
	f := &e.feeds
	f.mu.Lock()
	switch {
	case f.open >= e.MaxFeeds:
		reason, msg = FeedsFull, "too many live feeds open ("+strconv.Itoa(e.MaxFeeds)+")"
	case !signed && f.anon >= e.MaxFeeds-e.ReservedSignedIn:
		reason, msg = FeedsAnonymous, "too many live feeds open to readers not signed in ("+strconv.Itoa(e.MaxFeeds-e.ReservedSignedIn)+"; "+strconv.Itoa(e.ReservedSignedIn)+" are kept for signed-in readers)"
	case !signed && f.perNet[network] >= e.MaxFeedsPerNetwork:
		reason, msg = FeedsNetwork, "too many live feeds open from "+network+" ("+strconv.Itoa(e.MaxFeedsPerNetwork)+" a network to readers not signed in)"
	}
	if reason != "" {
		f.mu.Unlock()
		i := 0
		switch reason {
		case FeedsAnonymous:
			i = 1
		case FeedsNetwork:
			i = 2
		}
		f.refused[i].Add(1)
		f.lastRefused.Store(time.Now().UnixNano())
		return nil, reason, msg
	}
	f.open++
	if signed {
		f.openSignedIn++
	} else {
		f.anon++
		f.perNet[network]++
	}
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.open--
		if signed {
			f.openSignedIn--
		} else {
			f.anon--
			if f.perNet[network]--; f.perNet[network] == 0 {
				delete(f.perNet, network)
			}
		}
		f.mu.Unlock()
	}, "", ""
}
