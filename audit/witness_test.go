package audit_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/audit"
	"github.com/parley-engine/parley/tlog"
	"github.com/parley-engine/parley/tlog/cosign"
)

// A witness is given as its verifier key or as name:public key; both
// name the same verifier, and anything else is a key error.
func TestWitnessVerifier(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	vkey, err := cosign.VerifierKey(pub, "w1")
	if err != nil {
		t.Fatal(err)
	}
	a, err := audit.WitnessVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := audit.WitnessVerifier("w1:" + pub)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name() != "w1" || b.Name() != "w1" || a.KeyHash() != b.KeyHash() {
		t.Fatalf("%s %08x, %s %08x", a.Name(), a.KeyHash(), b.Name(), b.KeyHash())
	}
	engineStyle, _ := tlog.VerifierKey(pub, "w1") // a log's key (0x01), not a cosignature's (0x04)
	for _, bad := range []string{"", "w1", "w1:", ":" + pub, "w1:" + pub[:10], "w 1:" + pub, engineStyle, "w1+00000000+AAAA"} {
		if _, err := audit.WitnessVerifier(bad); !errors.Is(err, tlog.ErrKey) {
			t.Errorf("%q: %v, want %v", bad, err, tlog.ErrKey)
		}
	}
}
