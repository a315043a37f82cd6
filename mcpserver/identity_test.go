package mcpserver_test

import (
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/parley-engine/parley/mcpserver"
)

// A server started with a signing key signs every artifact it publishes:
// a charter that requires signatures admits its artifacts, and refuses,
// with the engine's code, those of a server speaking as the same
// participant without the key.
func TestMCP_SigningKey(t *testing.T) {
	_, nc := startEngine(t)
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	signed := connect(t, server(t, nc, mcpserver.Options{Participant: "architect", SigningKey: kp}), nil)
	unsigned := connect(t, server(t, nc, mcpserver.Options{Participant: "architect"}), nil)
	id := call(t, signed, "open_deliberation", map[string]any{"title": "Signed only", "participants": []any{"architect"},
		"keys": map[string]any{"architect": pub}, "require_signatures": true})["deliberation"].(string)
	claim := map[string]any{"deliberation": id, "payload": map[string]any{"statement": "Signed."}}
	if r := call(t, signed, "publish_claim", claim); r["outcome"] != "accepted" {
		t.Fatalf("%v", r)
	}
	claim["payload"] = map[string]any{"statement": "Not signed."}
	if r := refused(t, unsigned, "publish_claim", claim); r["outcome"] != "rejected" || r["code"] != "signature.missing" || r["error_class"] != "invalid_signature" {
		t.Fatalf("%v", r)
	}
	// A key that is not a user key, or a token that is not one, is refused
	// at start.
	acct, _ := nkeys.CreateAccount()
	for _, o := range []mcpserver.Options{{Participant: "architect", SigningKey: acct}, {Participant: "_supervisor x"}} {
		if _, err := mcpserver.NewWithOptions(nc, o); err == nil {
			t.Errorf("%+v: started", o)
		}
	}
}
