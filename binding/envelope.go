// Package binding is the briefing-and-binding envelope of seed 002
// (draft-morrison-binding-moment-envelope-04): the envelope a decider
// emits when a decision needs its principal, its digest, the principal's
// resolution, and the verifier that binds a resolution to exactly the
// envelope that was shown.
//
// Everything here is pure: values in, values out. An envelope is checked at
// the parse boundary (seed 002 §6.3: the JCS profile bounds, so that a
// duplicate member, an unpaired surrogate or an out-of-profile number is a
// finding and never a repaired digest), then against the grammar of §4–§5.
// A malformed envelope is reported with every finding, never repaired.
package binding

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/parley-engine/parley/canon"
)

// Finding codes of a malformed envelope (docs/ERRORS.md).
const (
	CodeProfile        = "envelope.profile"         // not JSON, or outside the JCS profile bounds (§6.3)
	CodeNotObject      = "envelope.not_object"      // the envelope (or a slot that must be one) is not an object
	CodeMissing        = "envelope.missing_member"  // a required member is absent
	CodeUnknown        = "envelope.unknown_member"  // a member the memo does not define
	CodeType           = "envelope.wrong_type"      // a member of the wrong type
	CodeBlank          = "envelope.blank"           // a string slot with no visible character
	CodeOptionsCount   = "envelope.options_count"   // options not 2–4
	CodeRecommendedIdx = "envelope.recommended_idx" // recommended_idx absent, negative or out of range
	CodeActionDigest   = "envelope.action_digest"   // an action_digest not "sha256:" + 64 lowercase hex
)

// Finding is one problem, with a stable code.
type Finding struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Option is one entry of slot 6.
type Option struct {
	Label        string `json:"label"`
	Reasoning    string `json:"reasoning"`
	ActionDigest string `json:"action_digest"`
}

// Hatches is slot 8.
type Hatches struct {
	FreeText bool `json:"free_text"`
	Dialogue bool `json:"dialogue"`
}

// Question holds the binding slots 5–8.
type Question struct {
	Stem           string   `json:"stem"`
	Options        []Option `json:"options"`
	RecommendedIdx int      `json:"recommended_idx"`
	Hatches        Hatches  `json:"hatches"`
}

// Meta is the optional meta slot.
type Meta struct {
	DecisionClass   string `json:"decision_class,omitempty"`
	CalibrationNote string `json:"calibration_note,omitempty"`
}

// Envelope is a well-formed briefing-and-binding envelope.
type Envelope struct {
	Synopsis        string   `json:"synopsis"`
	Findings        []string `json:"findings"`
	Recommendations []string `json:"recommendations"`
	Offer           string   `json:"offer"`
	Question        Question `json:"question"`
	Meta            *Meta    `json:"meta,omitempty"`

	// Digest is the envelope digest (§6.2) and Canonical the JCS form it
	// is computed over.
	Digest    canon.Digest `json:"-"`
	Canonical []byte       `json:"-"`
}

// Suppressed lists the hatches the envelope disables ("free_text",
// "dialogue"): a veto path removed, worth recording (§12.3).
func (e *Envelope) Suppressed() []string {
	var s []string
	if !e.Question.Hatches.FreeText {
		s = append(s, "free_text")
	}
	if !e.Question.Hatches.Dialogue {
		s = append(s, "dialogue")
	}
	return s
}

// ErrMalformed is returned, wrapped, with the findings of a malformed
// envelope or resolution.
var ErrMalformed = errors.New("binding: malformed")

// Malformed carries the findings.
type Malformed struct {
	What     string
	Findings []Finding
}

func (m *Malformed) Error() string {
	var b strings.Builder
	b.WriteString("binding: malformed " + m.What)
	for i, f := range m.Findings {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(f.Message + " (" + f.Code + ")")
	}
	return b.String()
}

func (m *Malformed) Unwrap() error { return ErrMalformed }

// Digest returns the envelope digest of raw: SHA-256 over the JCS form of
// the value, whatever the value (seed 002 §6). It does not check the
// grammar; ParseEnvelope does.
func Digest(raw []byte) (canon.Digest, error) {
	d, _, err := canon.JCSDigest(raw)
	return d, err
}

// ActionDigest returns the digest of an action under JCS (§5.6, where the
// action's profile pins JCS).
func ActionDigest(action []byte) (canon.Digest, error) { return Digest(action) }

// ParseEnvelope checks raw, the value of a binding_moment member, and
// returns the envelope, or a *Malformed error with every finding.
func ParseEnvelope(raw []byte) (*Envelope, error) {
	canonical, err := canon.Canonicalize(canon.JCS, raw)
	if err != nil {
		return nil, &Malformed{"envelope", []Finding{{CodeProfile, profileMessage(err)}}}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil { // cannot fail on canonical JCS
		return nil, &Malformed{"envelope", []Finding{{CodeProfile, err.Error()}}}
	}
	c := &checker{}
	e := c.envelope(v)
	if len(c.f) > 0 {
		return nil, &Malformed{"envelope", c.f}
	}
	e.Canonical = canonical
	e.Digest, _, _ = canon.JCSDigest(canonical)
	return e, nil
}

// FromToolResult finds the envelope in raw, which is either a tool result
// carrying a binding_moment member (§8.1) or the envelope itself, and
// parses it.
func FromToolResult(raw []byte) (*Envelope, error) {
	inner, ok, err := member(raw, "binding_moment")
	if err != nil {
		return nil, &Malformed{"envelope", []Finding{{CodeProfile, profileMessage(err)}}}
	}
	if !ok {
		return ParseEnvelope(raw)
	}
	return ParseEnvelope(inner)
}

// EnvelopeValue returns the binding_moment member of a tool result, or raw
// itself when raw is not an object carrying one (the envelope alone).
func EnvelopeValue(raw []byte) []byte {
	if inner, ok, err := member(raw, "binding_moment"); err == nil && ok {
		return inner
	}
	return raw
}

// member returns the raw value of top-level member name of raw when raw is
// an object that has it. The outer value is checked against the JCS
// profile first, so a duplicate binding_moment member is refused.
func member(raw []byte, name string) ([]byte, bool, error) {
	if _, err := canon.Canonicalize(canon.JCS, raw); err != nil {
		return nil, false, err
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, false, nil // not an object
	}
	v, ok := m[name]
	return v, ok, nil
}

func profileMessage(err error) string {
	var ce *canon.Error
	if errors.As(err, &ce) {
		return fmt.Sprintf("%s at byte %d: %s", ce.Code, ce.Offset, ce.Msg)
	}
	return err.Error()
}

// checker collects findings while it walks a decoded value.
type checker struct{ f []Finding }

func (c *checker) add(code, format string, a ...any) {
	c.f = append(c.f, Finding{code, fmt.Sprintf(format, a...)})
}

// object checks that v is an object with exactly the required members (and
// at most the optional ones), reporting under path.
func (c *checker) object(v any, path string, required, optional []string) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		c.add(CodeNotObject, "%s is %s, not an object", path, typeName(v))
		return nil
	}
	for _, k := range required {
		if _, ok := m[k]; !ok {
			c.add(CodeMissing, "%s has no %s", path, k)
		}
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(required, k) && !slices.Contains(optional, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		c.add(CodeUnknown, "%s has a member the memo does not define: %q", path, k)
	}
	return m
}

func (c *checker) str(m map[string]any, key, path string) string {
	v, ok := m[key]
	if !ok {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		c.add(CodeType, "%s.%s is %s, not a string", path, key, typeName(v))
		return ""
	}
	if strings.TrimSpace(s) == "" {
		c.add(CodeBlank, "%s.%s is blank", path, key)
	}
	return s
}

func (c *checker) strings(m map[string]any, key, path string) []string {
	v, ok := m[key]
	if !ok {
		return nil
	}
	a, ok := v.([]any)
	if !ok {
		c.add(CodeType, "%s.%s is %s, not an array of strings", path, key, typeName(v))
		return nil
	}
	out := make([]string, 0, len(a))
	for i, x := range a {
		s, ok := x.(string)
		if !ok {
			c.add(CodeType, "%s.%s[%d] is %s, not a string", path, key, i, typeName(x))
			continue
		}
		if strings.TrimSpace(s) == "" {
			c.add(CodeBlank, "%s.%s[%d] is blank", path, key, i)
		}
		out = append(out, s)
	}
	return out
}

func (c *checker) boolean(m map[string]any, key, path string) bool {
	v, ok := m[key]
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		c.add(CodeType, "%s.%s is %s, not a boolean", path, key, typeName(v))
	}
	return b
}

func (c *checker) envelope(v any) *Envelope {
	e := &Envelope{}
	m := c.object(v, "binding_moment", []string{"synopsis", "findings", "recommendations", "offer", "question"}, []string{"meta"})
	if m == nil {
		return e
	}
	e.Synopsis = c.str(m, "synopsis", "binding_moment")
	e.Findings = c.strings(m, "findings", "binding_moment")
	e.Recommendations = c.strings(m, "recommendations", "binding_moment")
	e.Offer = c.str(m, "offer", "binding_moment")
	if q, ok := m["question"]; ok {
		c.question(q, &e.Question)
	}
	if mv, ok := m["meta"]; ok {
		if mm := c.object(mv, "meta", nil, []string{"decision_class", "calibration_note"}); mm != nil {
			e.Meta = &Meta{DecisionClass: c.str(mm, "decision_class", "meta"), CalibrationNote: c.str(mm, "calibration_note", "meta")}
		}
	}
	return e
}

func (c *checker) question(v any, q *Question) {
	m := c.object(v, "question", []string{"stem", "options", "hatches"}, []string{"recommended_idx"})
	if m == nil {
		return
	}
	q.Stem = c.str(m, "stem", "question")
	if ov, ok := m["options"]; ok {
		a, ok := ov.([]any)
		if !ok {
			c.add(CodeType, "question.options is %s, not an array", typeName(ov))
		} else {
			if len(a) < 2 || len(a) > 4 {
				c.add(CodeOptionsCount, "question.options has %d entries; an envelope offers 2 to 4", len(a))
			}
			for i, x := range a {
				path := fmt.Sprintf("question.options[%d]", i)
				om := c.object(x, path, []string{"label", "reasoning", "action_digest"}, nil)
				if om == nil {
					continue
				}
				o := Option{Label: c.str(om, "label", path), Reasoning: c.str(om, "reasoning", path)}
				if dv, ok := om["action_digest"]; ok {
					s, isStr := dv.(string)
					switch {
					case !isStr:
						c.add(CodeType, "%s.action_digest is %s, not a string", path, typeName(dv))
					case !validDigest(s):
						c.add(CodeActionDigest, "%s.action_digest %q is not \"sha256:\" followed by 64 lowercase hexadecimal characters", path, clip(s))
					}
					o.ActionDigest = s
				}
				q.Options = append(q.Options, o)
			}
		}
	}
	if rv, ok := m["recommended_idx"]; !ok {
		c.add(CodeRecommendedIdx, "question.recommended_idx is absent; exactly one option must be recommended")
	} else if n, ok := rv.(json.Number); !ok {
		c.add(CodeType, "question.recommended_idx is %s, not an integer", typeName(rv))
	} else if i, err := n.Int64(); err != nil || i < 0 {
		c.add(CodeRecommendedIdx, "question.recommended_idx %s is not a non-negative integer", n)
	} else if a, isArr := m["options"].([]any); isArr && i >= int64(len(a)) {
		c.add(CodeRecommendedIdx, "question.recommended_idx %d is out of range for %d options", i, len(a))
	} else {
		q.RecommendedIdx = int(i)
	}
	if hv, ok := m["hatches"]; ok {
		if hm := c.object(hv, "question.hatches", []string{"free_text", "dialogue"}, nil); hm != nil {
			q.Hatches = Hatches{FreeText: c.boolean(hm, "free_text", "question.hatches"), Dialogue: c.boolean(hm, "dialogue", "question.hatches")}
		}
	}
}

// validDigest reports whether s is "sha256:" + 64 lowercase hex (§6.2).
func validDigest(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		if !(h[i] >= '0' && h[i] <= '9' || h[i] >= 'a' && h[i] <= 'f') {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
