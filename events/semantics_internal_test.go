package events

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/parley-engine/parley/canon"
)

// The semantic read takes the top-level members from the canonicalizer
// when its fast path found them, and reads them from the bytes otherwise:
// both ways must give the same artifact and the same error.
func TestSemantics_MembersFromCanonAgree(t *testing.T) {
	suite := semanticVectors(t)
	v := NewValidator()
	c := canon.New(canon.AMD)
	both := 0
	for _, vec := range suite.Vectors {
		// The vectors are written with spaces; their canonical forms
		// are what the fast path takes.
		in, err := canon.Canonicalize(canon.AMD, []byte(vec.Input))
		if err != nil {
			continue
		}
		canonical, _, err := c.ID(in)
		if err != nil {
			continue
		}
		top := c.TopMembers()
		if top == nil {
			continue
		}
		a1, a2 := &Artifact{Canonical: canonical}, &Artifact{Canonical: canonical}
		e1, e2 := v.semantics(a1, top), v.semantics(a2, nil)
		if fmt.Sprint(e1) != fmt.Sprint(e2) || !reflect.DeepEqual(a1, a2) {
			t.Fatalf("%s: with the canonicalizer's members %v %+v, read from the bytes %v %+v", vec.Name, e1, a1, e2, a2)
		}
		both++
	}
	t.Logf("%d of %d vectors read both ways", both, len(suite.Vectors))
	if both < len(suite.Vectors)/2 {
		t.Fatalf("only %d of %d vectors took the fast path", both, len(suite.Vectors))
	}
}

// semanticVectors reads testdata/vectors/semantic.json's inputs.
func semanticVectors(t *testing.T) (suite struct {
	Vectors []struct{ Name, Input string }
}) {
	t.Helper()
	b, err := os.ReadFile("../testdata/vectors/semantic.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &suite); err != nil {
		t.Fatal(err)
	}
	return suite
}
