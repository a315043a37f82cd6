package events

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/internal/jsontest"
)

// spaced writes a canonical object with a space after each top-level
// comma and colon outside strings, so that canon's fast path turns it
// down and its members are read from the bytes.
func spaced(in string) string {
	var b strings.Builder
	inStr := false
	for i := 0; i < len(in); i++ {
		c := in[i]
		b.WriteByte(c)
		switch {
		case inStr && c == '\\':
			i++
			b.WriteByte(in[i])
		case c == '"':
			inStr = !inStr
		case !inStr && (c == ',' || c == ':'):
			b.WriteByte(' ')
		}
	}
	return b.String()
}

func fastAttackArtifacts() []string {
	const claim = `"artifact_type":"CLAIM"`
	const pv = `"protocol_version":"0.1"`
	const pay = `"payload":{"statement":"x"}`
	const refs = `"references":[]`
	return []string{
		jsontest.WithID(claim, pay, pv, refs),
		jsontest.WithID(``+`"":1`, claim, pay, pv, refs),
		jsontest.WithID(`"artifact_idx":1`, claim, pay, pv, refs),
		jsontest.WithID(`"a/b~c":1`, claim, pay, pv, refs),
		jsontest.WithID(claim, `"extensions":{"x.y":1,"z.w":[1,{"artifact_id":2}]}`, pay, pv, refs),
		jsontest.WithID(claim, `"extensions":{"bad":1}`, pay, pv, refs),
		jsontest.WithID(claim, `"extensions":[]`, pay, pv, refs),
		jsontest.WithID(claim, `"payload":{"artifact_id":"x","statement":"é 数据 😀"}`, pv, refs),
		jsontest.WithID(claim, pay, `"protocol_version":1`, refs),
		jsontest.WithID(claim, pay, `"protocol_version":"0.2"`, refs),
		jsontest.WithID(claim, pay, `"protocol_version":"1.0"`, refs),
		jsontest.WithID(claim, pay, refs),
		jsontest.WithID(claim, pay, pv, refs, "\"\x7f\":1"),
		jsontest.WithID(claim, pay, pv, refs, "\"é\":null"),
		jsontest.WithID(claim, pay, pv, refs, "\"zz\":{}"),
		jsontest.WithID(`"artifact_type":"NOPE"`, pay, pv, refs),
		jsontest.WithID(`"artifact_type":1`, pay, pv, refs),
		jsontest.WithID(claim, `"payload":[]`, pv, refs),
		jsontest.WithID(claim, pay, pv, `"references":{}`),
		jsontest.WithID(claim, pay, pv, `"references":[1]`),
		jsontest.WithID(claim, pay, pv, `"references":[{"artifact_id":"sha256:`+strings.Repeat("a", 64)+`","relation":"supports"}]`),
		jsontest.WithID(claim, pay, pv, `"references":[{"artifact_id":"sha256:`+strings.Repeat("a", 64)+`"},{"artifact_id":"sha256:`+strings.Repeat("a", 64)+`"}]`),
		jsontest.WithID(`"a":1`, claim, pay, pv, refs),
		jsontest.WithID(),
		`{"artifact_id":1,` + claim + `}`,
	}
}

// The semantic read with the canonicalizer's members and the one from the
// bytes agree, on crafted artifacts and on the canonical form of every
// semantic vector; and Validate of the canonical form (which the fast path
// takes) agrees with Validate of a spaced form of it (which it does not).
func TestSemantics_FastAttackBothWays(t *testing.T) {
	ins := fastAttackArtifacts()
	suite := semanticVectors(t)
	for _, vec := range suite.Vectors {
		if c, err := canon.Canonicalize(canon.AMD, []byte(vec.Input)); err == nil {
			ins = append(ins, string(c))
		}
	}
	v := NewValidator()
	c := canon.New(canon.AMD)
	took := 0
	for _, in := range ins {
		canonical, _, err := c.ID([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if top := c.TopMembers(); top != nil {
			took++
			a1, a2 := &Artifact{Canonical: canonical}, &Artifact{Canonical: canonical}
			e1, e2 := v.semantics(a1, top), v.semantics(a2, nil)
			if fmt.Sprint(e1) != fmt.Sprint(e2) || !reflect.DeepEqual(a1, a2) {
				t.Fatalf("%s: with the canonicalizer's members %v %+v, read from the bytes %v %+v", in, e1, a1, e2, a2)
			}
		}
		s := spaced(in)
		a1, e1 := v.Validate([]byte(in))
		a2, e2 := v.Validate([]byte(s))
		var ce1, ce2 *canon.Error
		switch {
		case errors.As(e1, &ce1) || errors.As(e2, &ce2):
			// The offsets of canon's errors depend on the spelling.
			if !errors.As(e1, &ce1) || !errors.As(e2, &ce2) || ce1.Code != ce2.Code {
				t.Fatalf("%s: %v, spaced %v", in, e1, e2)
			}
		case fmt.Sprint(e1) != fmt.Sprint(e2):
			t.Fatalf("%s: %v, spaced (%s) %v", in, e1, s, e2)
		case a1 != nil && a2 != nil:
			if a1.ID != a2.ID || !reflect.DeepEqual(a1.Canonical, a2.Canonical) || !reflect.DeepEqual(a1, a2) {
				t.Fatalf("%s: %+v, spaced %+v", in, a1, a2)
			}
		case (a1 == nil) != (a2 == nil):
			t.Fatalf("%s: %+v, spaced %+v", in, a1, a2)
		}
	}
	if took < len(ins)/2 {
		t.Fatalf("the fast path took only %d of %d", took, len(ins))
	}
}

// ValidateTransient of an input the fast path takes (whose canonical form
// is the caller's own buffer) keeps nothing that points into it: the
// artifact is the same after the buffer is overwritten, and the same as
// for a spaced form of the input.
func TestValidateTransient_FastAttackNoAlias(t *testing.T) {
	v := NewValidator()
	for _, in := range fastAttackArtifacts() {
		raw := []byte(in)
		a1, e1 := v.ValidateTransient(raw)
		for k := range raw {
			raw[k] = 'X'
		}
		a2, e2 := v.ValidateTransient([]byte(spaced(in)))
		if (e1 == nil) != (e2 == nil) {
			t.Fatalf("%s: %v, spaced %v", in, e1, e2)
		}
		if e1 == nil && !reflect.DeepEqual(a1, a2) {
			t.Fatalf("%s: %+v after its buffer was overwritten, spaced %+v", in, a1, a2)
		}
	}
}
