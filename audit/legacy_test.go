package audit_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/parley-engine/parley/audit"
	"github.com/parley-engine/parley/events"
	"github.com/parley-engine/parley/projector"
	"github.com/parley-engine/parley/recording"
	"github.com/parley-engine/parley/wire"
)

// A recording with rejections exported by an engine from before the
// rejection chains carries the v2 digest (its kept rejections in detail):
// it audits OK, as the same record with today's digest does, and a digest
// that is neither is a mismatch.
func TestAudit_LegacyDigest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		digest func(d *projector.Deliberation) string
		ok     bool
	}{
		{"current", func(d *projector.Deliberation) string { return d.StateDigest().String() }, true},
		{"legacy", func(d *projector.Deliberation) string {
			l, ok := d.LegacyStateDigest()
			if !ok {
				t.Fatal("no legacy digest for a deliberation with a rejection")
			}
			return l.String()
		}, true},
		{"other", func(*projector.Deliberation) string { return "sha256:" + string(bytes.Repeat([]byte("0"), 64)) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newScript(t)
			s.msg(wire.ControlSubject(delib), []byte(`{"op":"open","charter":{"title":"t","participants":["alice"]}}`))
			s.art("alice", events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "mine"}}))
			if o := s.art("mallory", events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "not in the charter"}})); o.Rejection == nil {
				t.Fatal("mallory's claim was admitted")
			}
			d := s.p.Deliberation(delib)
			s.w.StateDigest = tc.digest(d)
			if err := s.w.Close(); err != nil {
				t.Fatal(err)
			}
			r, err := recording.NewReader(bytes.NewReader(s.buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			rep, err := audit.Run(r)
			if err != nil {
				t.Fatal(err)
			}
			mismatch := slices.Contains(findings(rep), audit.CodeDigest)
			if mismatch == tc.ok {
				t.Fatalf("trailer %s: findings %v\n%s", s.w.StateDigest, findings(rep), rep.Text())
			}
		})
	}
}
