package events_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/parley-engine/parley/events"
)

// Every reference error names the member at fault by its JSON pointer,
// with the reference's index, whichever reference it is.
func TestReferenceErrors_Paths(t *testing.T) {
	target := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "a target"}}).ID.String()
	other := events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: "another target"}}).ID.String()
	ref := func(id, rel string) string { return fmt.Sprintf(`{"artifact_id":%q,"relation":%q}`, id, rel) }
	good := ref(target, "supports")
	// 20 distinct references (past the linear duplicate check) and one more
	// repeating the fifth.
	var many []string
	for i := range 20 {
		many = append(many, ref(events.MustSeal(events.Draft{Type: events.TypeClaim, Payload: events.Claim{Statement: fmt.Sprintf("t%d", i)}}).ID.String(), "supports"))
	}
	many = append(many, many[4])
	for _, c := range []struct {
		name, refs string
		want       *events.Error
		path       string
	}{
		{"not an object", `[1]`, events.ErrReferenceNotObject, "/references/0"},
		{"id not a string", `[{"artifact_id":1,"relation":"supports"}]`, events.ErrReferenceInvalidID, "/references/0/artifact_id"},
		{"id not a digest", `[{"artifact_id":"sha256:zz","relation":"supports"}]`, events.ErrReferenceInvalidID, "/references/0/artifact_id"},
		{"relation not a string", fmt.Sprintf(`[{"artifact_id":%q,"relation":7}]`, target), events.ErrReferenceUnknownRel, "/references/0/relation"},
		{"unknown relation", `[` + ref(target, "nope") + `]`, events.ErrReferenceUnknownRel, "/references/0/relation"},
		{"unknown member, escaped", fmt.Sprintf(`[{"artifact_id":%q,"relation":"supports","x~y/z":1}]`, target), events.ErrReferenceUnknownMember, "/references/0/x~0y~1z"},
		{"no id", `[{"relation":"supports"}]`, events.ErrReferenceMissingID, "/references/0"},
		{"second: unknown relation", `[` + good + `,` + ref(other, "nope") + `]`, events.ErrReferenceUnknownRel, "/references/1/relation"},
		{"duplicate", `[` + good + `,` + good + `]`, events.ErrReferenceDuplicate, "/references/1"},
		{"duplicate among many", `[` + strings.Join(many, ",") + `]`, events.ErrReferenceDuplicate, "/references/20"},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw := sealRaw(t, `{"protocol_version":"0.1","artifact_type":"CLAIM","payload":{"statement":"s"},"references":`+c.refs+`}`)
			_, err := events.Validate(raw)
			var e *events.Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want %s", err, c.want.Code)
			}
			if e.Code != c.want.Code || e.Path != c.path {
				t.Errorf("got %s at %q, want %s at %q (%v)", e.Code, e.Path, c.want.Code, c.path, err)
			}
		})
	}
	// The same references, well formed, are accepted.
	raw := sealRaw(t, `{"protocol_version":"0.1","artifact_type":"CLAIM","payload":{"statement":"s"},"references":[`+strings.Join(many[:20], ",")+`]}`)
	if a, err := events.Validate(raw); err != nil || len(a.References) != 20 {
		t.Fatalf("%v", err)
	}
}
