package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/parley-engine/parley/canon"
	"github.com/parley-engine/parley/events"
)

func resolve(t testing.TB, s map[string]any) *jsonschema.Resolved {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var js jsonschema.Schema
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	r, err := js.Resolve(nil)
	if err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return r
}

// validateDraft seals the draft d ({payload, references, extensions?}) of
// type typ as published bytes and validates them.
func validateDraft(typ events.Type, d map[string]any) error {
	w := map[string]any{"protocol_version": "0.1", "artifact_type": string(typ)}
	for k, v := range d {
		w[k] = v
	}
	b, _ := json.Marshal(w)
	id, err := canon.ID(b)
	if err != nil {
		return err
	}
	w["artifact_id"] = id.String()
	b, _ = json.Marshal(w)
	_, err = events.Validate(b)
	return err
}

func codeOf(err error) string {
	var c interface{ ErrorCode() string }
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	return ""
}

func clone(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var c map[string]any
	json.Unmarshal(b, &c)
	return c
}

var someID = "sha256:" + strings.Repeat("ab", 32)

// baseDraft is a valid draft of rule r's type, built from the rule.
func baseDraft(r events.PayloadRule) map[string]any {
	p := map[string]any{}
	for _, f := range r.Fields {
		if !f.Required {
			continue
		}
		switch f.Kind {
		case events.KindText:
			p[f.Name] = "something"
		case events.KindBoolean:
			p[f.Name] = true
		case events.KindEnum:
			p[f.Name] = f.Enum[len(f.Enum)-1]
		case events.KindDispositions, events.KindIssues, events.KindIDs:
			p[f.Name] = []any{}
		}
	}
	refs := []any{}
	if len(r.NeedsRelation) > 0 {
		refs = append(refs, map[string]any{"artifact_id": someID, "relation": string(r.NeedsRelation[0])})
	}
	return map[string]any{"payload": p, "references": refs}
}

// Each payload rule is the validator's: the validator accepts a draft
// built from the rule, reports the rule's codes when a member is missing
// or of the wrong kind, and when a needed relation is missing; the
// schema rendered from the rule agrees each time. Every payload code of
// the validator is a rule's or is named below with where the schema has
// it.
func TestPayloadRules(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range events.PayloadRules() {
		schema := resolve(t, events.DraftSchema(r.Type))
		check := func(name string, d map[string]any, want string) {
			t.Helper()
			if got := codeOf(validateDraft(r.Type, d)); got != want {
				t.Errorf("%s %s: the validator says %q, the rule %q", r.Type, name, got, want)
			}
			serr := schema.Validate(clone(d))
			if (serr == nil) != (want == "") {
				t.Errorf("%s %s: the schema says %v, the rule %q", r.Type, name, serr, want)
			}
			seen[want] = true
		}
		base := baseDraft(r)
		check("base", base, "")
		for _, f := range r.Fields {
			if f.Required {
				d := clone(base)
				delete(d["payload"].(map[string]any), f.Name)
				check("without "+f.Name, d, f.Missing.Code)
			}
			if f.Invalid != nil {
				d := clone(base)
				d["payload"].(map[string]any)[f.Name] = 12
				check(f.Name+" a number", d, f.Invalid.Code)
			}
			if f.Kind == events.KindText {
				d := clone(base)
				d["payload"].(map[string]any)[f.Name] = " \t\u00a0\u3000"
				check(f.Name+" blank", d, f.Invalid.Code)
			}
		}
		if r.MissingRelation != nil {
			d := clone(base)
			d["references"] = []any{map[string]any{"artifact_id": someID, "relation": "considers"}}
			check("without the relation", d, r.MissingRelation.Code)
		}
	}
	// Codes of the parts of a payload that the schema has inside the
	// member's own schema, with a case each.
	decision, _ := events.PayloadRuleOf(events.TypeDecision)
	dec := baseDraft(decision)
	termination, _ := events.PayloadRuleOf(events.TypeTermination)
	term := baseDraft(termination)
	for _, c := range []struct {
		name string
		typ  events.Type
		base map[string]any
		set  func(d map[string]any)
		want string
	}{
		{"a disposition without rationale", events.TypeDecision, dec, func(d map[string]any) {
			d["payload"].(map[string]any)["objection_dispositions"] = []any{map[string]any{"objection": someID, "disposition": "addressed"}}
		}, events.ErrInvalidDisposition.Code},
		{"an unknown disposition", events.TypeDecision, dec, func(d map[string]any) {
			d["payload"].(map[string]any)["objection_dispositions"] = []any{map[string]any{"objection": someID, "disposition": "ignored", "rationale": "r"}}
		}, events.ErrInvalidDisposition.Code},
		{"an issue without description", events.TypeDecision, dec, func(d map[string]any) {
			d["payload"].(map[string]any)["unresolved_issues"] = []any{map[string]any{"objection": someID}}
		}, events.ErrInvalidUnresolvedIssue.Code},
		{"completed without decides", events.TypeTermination, term, func(d map[string]any) {
			d["payload"].(map[string]any)["state"] = "completed"
		}, events.ErrMissingDecides.Code},
		{"suspended listing objections", events.TypeTermination, term, func(d map[string]any) {
			d["payload"].(map[string]any)["state"] = "suspended"
			d["payload"].(map[string]any)["unresolved_objections"] = []any{}
		}, events.ErrUnresolvedOnlyTerminal.Code},
	} {
		schema := resolve(t, events.DraftSchema(c.typ))
		d := clone(c.base)
		c.set(d)
		if got := codeOf(validateDraft(c.typ, d)); got != c.want {
			t.Errorf("%s: the validator says %q, want %q", c.name, got, c.want)
		}
		if schema.Validate(clone(d)) == nil {
			t.Errorf("%s: the schema accepts it", c.name)
		}
		seen[c.want] = true
	}
	// What a schema cannot say: that two entries name the same objection
	// (uniqueness by one member), and that each listed objection is also
	// referenced (a relation between two members).
	inexpressible := map[string]bool{events.ErrDuplicateDisposition.Code: true, events.ErrUnreferencedUnresolved.Code: true}
	for _, e := range events.Codes {
		if strings.HasPrefix(e.Code, "semantic.") && !seen[e.Code] && !inexpressible[e.Code] {
			t.Errorf("%s: no payload rule has it", e.Code)
		}
	}
}

// Every draft schema accepts the draft of every valid semantic vector of
// its type; for the invalid ones of the draft's members (payload,
// references, extensions), the schema refuses what the validator
// refuses, except what no schema can express.
func TestDraftSchema_Vectors(t *testing.T) {
	inexpressible := map[string]bool{events.ErrDuplicateDisposition.Code: true, events.ErrUnreferencedUnresolved.Code: true}
	schemas := map[events.Type]*jsonschema.Resolved{}
	for _, typ := range events.Types {
		schemas[typ] = resolve(t, events.DraftSchema(typ))
	}
	valid, refused := 0, 0
	for _, v := range loadSemantic(t).Vectors {
		var m map[string]any
		if json.Unmarshal([]byte(v.Input), &m) != nil {
			continue
		}
		typ, _ := m["artifact_type"].(string)
		schema := schemas[events.Type(typ)]
		if schema == nil {
			continue
		}
		draft := map[string]any{}
		for _, k := range []string{"payload", "references", "extensions"} {
			if x, ok := m[k]; ok {
				draft[k] = x
			}
		}
		err := schema.Validate(draft)
		switch {
		case v.Code == "":
			valid++
			if err != nil {
				t.Errorf("%s: the schema refuses a valid artifact: %v", v.Name, err)
			}
		case strings.HasPrefix(v.Code, "semantic.") || strings.HasPrefix(v.Code, "reference.") || strings.HasPrefix(v.Code, "extension."):
			if inexpressible[v.Code] {
				continue
			}
			refused++
			if err == nil {
				t.Errorf("%s: the validator refuses it (%s), the schema accepts it", v.Name, v.Code)
			}
		}
	}
	t.Logf("%d valid and %d refused vectors checked", valid, refused)
	if valid < 20 || refused < 40 {
		t.Fatalf("%d valid and %d refused vectors checked", valid, refused)
	}
}
