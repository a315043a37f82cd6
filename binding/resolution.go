package binding

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/parley-engine/parley/canon"
)

// Kind is what a resolution did (§7.3). The four never collapse.
type Kind string

const (
	KindOption   Kind = "option"   // selection of an option of slot 6
	KindAnswer   Kind = "answer"   // the answer-space hatch, with a free answer
	KindQuestion Kind = "question" // the question-space hatch: the question is rejected, deliberation reopens
	KindDeclined Kind = "declined" // the question answered in the negative: stop
)

// Finding codes of a resolution and of its verification (docs/ERRORS.md).
const (
	CodeResolutionProfile = "resolution.profile"           // not JSON, or outside the JCS profile bounds
	CodeResolutionShape   = "resolution.malformed"         // a member missing, unknown, of the wrong type, or not allowed for the kind
	CodeResolutionKind    = "resolution.unknown_kind"      // resolution not one of the four
	CodeEnvelopeDigest    = "resolution.envelope_digest"   // envelope_digest not in the form of §6.2
	CodeEnvelopeMismatch  = "resolution.envelope_mismatch" // names another envelope than the one held
	CodeOptionRange       = "resolution.option_range"      // option_idx out of range for the envelope
	CodeUnknownEnvelope   = "resolution.unknown_envelope"  // names no envelope emitted (discarded)
	CodeAlreadyResolved   = "resolution.already_resolved"  // names an envelope already resolved (discarded)
	CodeActionMismatch    = "resolution.action_mismatch"   // the action performed is not the option's: no authority
	CodeNotAuthority      = "resolution.not_authority"     // a resolution other than option authorises nothing
	CodeNoActionToCompare = "resolution.no_action"         // an option resolution checked with no action: not yet authority
)

// Resolution is a well-formed binding_moment_resolution.
type Resolution struct {
	EnvelopeDigest canon.Digest `json:"-"`
	Kind           Kind         `json:"resolution"`
	OptionIdx      int          `json:"option_idx,omitempty"` // KindOption only
	Answer         string       `json:"answer,omitempty"`     // KindAnswer only
}

// MarshalJSON writes the resolution in its wire form (the inner object).
func (r Resolution) MarshalJSON() ([]byte, error) {
	m := map[string]any{"envelope_digest": r.EnvelopeDigest.String(), "resolution": r.Kind}
	switch r.Kind {
	case KindOption:
		m["option_idx"] = r.OptionIdx
	case KindAnswer:
		m["answer"] = r.Answer
	}
	return json.Marshal(m)
}

// Wire returns {"binding_moment_resolution": r}.
func (r Resolution) Wire() []byte {
	b, _ := json.Marshal(map[string]any{"binding_moment_resolution": r})
	return b
}

// ParseResolution checks raw, either {"binding_moment_resolution": {...}}
// or the inner object, against §7.3: the exact members of each kind.
func ParseResolution(raw []byte) (*Resolution, error) {
	if inner, ok, err := member(raw, "binding_moment_resolution"); err != nil {
		return nil, &Malformed{"resolution", []Finding{{CodeResolutionProfile, profileMessage(err)}}}
	} else if ok {
		raw = inner
	}
	canonical, err := canon.Canonicalize(canon.JCS, raw)
	if err != nil {
		return nil, &Malformed{"resolution", []Finding{{CodeResolutionProfile, profileMessage(err)}}}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.UseNumber()
	_ = dec.Decode(&v)
	c := &checker{}
	r := &Resolution{}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &Malformed{"resolution", []Finding{{CodeResolutionShape, "a resolution is an object, not " + typeName(v)}}}
	}
	shape := func(format string, a ...any) { c.add(CodeResolutionShape, format, a...) }
	for k := range m {
		switch k {
		case "envelope_digest", "resolution", "option_idx", "answer":
		default:
			shape("a member §7.3 does not define: %q", k)
		}
	}
	if dv, ok := m["envelope_digest"]; !ok {
		shape("envelope_digest is absent")
	} else if s, isStr := dv.(string); !isStr {
		shape("envelope_digest is %s, not a string", typeName(dv))
	} else if d, ok := canon.ParseDigest(s); !ok || !validDigest(s) {
		c.add(CodeEnvelopeDigest, "envelope_digest %q is not \"sha256:\" followed by 64 lowercase hexadecimal characters", clip(s))
	} else {
		r.EnvelopeDigest = d
	}
	kv, hasKind := m["resolution"]
	ks, isStr := kv.(string)
	switch {
	case !hasKind:
		shape("resolution is absent")
	case !isStr:
		shape("resolution is %s, not a string", typeName(kv))
	default:
		r.Kind = Kind(ks)
	}
	_, hasIdx := m["option_idx"]
	_, hasAnswer := m["answer"]
	switch r.Kind {
	case KindOption:
		if !hasIdx {
			shape("an option resolution needs option_idx")
		} else if n, ok := m["option_idx"].(json.Number); !ok {
			shape("option_idx is %s, not an integer", typeName(m["option_idx"]))
		} else if i, err := n.Int64(); err != nil || i < 0 {
			c.add(CodeOptionRange, "option_idx %s is not a non-negative integer", n)
		} else {
			r.OptionIdx = int(i)
		}
		if hasAnswer {
			shape("answer is allowed only in an answer resolution")
		}
	case KindAnswer:
		if !hasAnswer {
			shape("an answer resolution needs answer")
		} else if s, ok := m["answer"].(string); !ok {
			shape("answer is %s, not a string", typeName(m["answer"]))
		} else if len(bytes.TrimSpace([]byte(s))) == 0 {
			shape("answer is blank")
		} else {
			r.Answer = s
		}
		if hasIdx {
			shape("option_idx is allowed only in an option resolution")
		}
	case KindQuestion, KindDeclined:
		if hasIdx {
			shape("option_idx is allowed only in an option resolution")
		}
		if hasAnswer {
			shape("answer is allowed only in an answer resolution")
		}
	case "":
	default:
		c.add(CodeResolutionKind, "resolution %q is not option, answer, question or declined", clip(string(r.Kind)))
	}
	if len(c.f) > 0 {
		return nil, &Malformed{"resolution", c.f}
	}
	return r, nil
}

// Verdict is the verification of a resolution against an envelope.
type Verdict struct {
	// OK: the resolution is a resolution of this envelope (a record of
	// what the principal did).
	OK         bool `json:"ok"`
	Resolution Kind `json:"resolution,omitempty"`
	// Authority: an option resolution whose option's action_digest is the
	// digest of the action about to be performed (§7.3). Nothing else is
	// authority for any action.
	Authority bool      `json:"authority"`
	Findings  []Finding `json:"findings"`
}

// Verify checks r against env (§7.3). action, when not nil, is the action
// about to be performed: it is digested under JCS and compared with the
// selected option's action_digest.
func Verify(env *Envelope, r *Resolution, action []byte) Verdict {
	v := Verdict{Resolution: r.Kind, Findings: []Finding{}}
	add := func(code, format string, a ...any) {
		v.Findings = append(v.Findings, Finding{code, fmt.Sprintf(format, a...)})
	}
	if r.EnvelopeDigest != env.Digest {
		add(CodeEnvelopeMismatch, "the resolution names envelope %s; the envelope held is %s", r.EnvelopeDigest, env.Digest)
		return v
	}
	if r.Kind == KindOption && r.OptionIdx >= len(env.Question.Options) {
		add(CodeOptionRange, "option_idx %d is out of range for %d options", r.OptionIdx, len(env.Question.Options))
		return v
	}
	v.OK = true
	switch {
	case r.Kind != KindOption:
		if action != nil {
			add(CodeNotAuthority, "a %s resolution authorises no action", r.Kind)
		}
	case action == nil:
		add(CodeNoActionToCompare, "no action given: the selection of option %d is a record, not yet authority", r.OptionIdx)
	default:
		d, err := ActionDigest(action)
		want := env.Question.Options[r.OptionIdx].ActionDigest
		switch {
		case err != nil:
			add(CodeActionMismatch, "the action is not JCS-canonicalizable (%s): no authority", profileMessage(err))
		case d.String() != want:
			add(CodeActionMismatch, "the action's digest is %s; option %d authorises %s", d, r.OptionIdx, want)
		default:
			v.Authority = true
		}
	}
	return v
}

// Tracker is the stateful side of §7.3 for one agent (or engine): the
// envelopes emitted and not yet resolved. A resolution that names an
// unknown envelope, or one already resolved, is discarded. It also keeps,
// per decider, the counts behind the question-space veto rate (§12.2) and
// the hatch suppressions (§12.3). Safe for concurrent use.
type Tracker struct {
	mu       sync.Mutex
	open     map[canon.Digest]*emitted
	resolved map[canon.Digest]Kind
	stats    map[string]*DeciderStats
}

type emitted struct {
	env     *Envelope
	decider string
}

// DeciderStats are one decider's binding moments.
type DeciderStats struct {
	Emitted        int          `json:"emitted"`
	Resolved       map[Kind]int `json:"resolved"`
	HatchesOff     int          `json:"hatch_suppressed"` // envelopes that disabled a hatch
	QuestionVetoes int          `json:"question_vetoes"`
}

// VetoRate is the share of this decider's resolved binding moments whose
// question the principal rejected (§12.2); 0 with none resolved.
func (s DeciderStats) VetoRate() float64 {
	n := 0
	for _, c := range s.Resolved {
		n += c
	}
	if n == 0 {
		return 0
	}
	return float64(s.QuestionVetoes) / float64(n)
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker {
	return &Tracker{open: map[canon.Digest]*emitted{}, resolved: map[canon.Digest]Kind{}, stats: map[string]*DeciderStats{}}
}

func (t *Tracker) statsOf(decider string) *DeciderStats {
	s := t.stats[decider]
	if s == nil {
		s = &DeciderStats{Resolved: map[Kind]int{}}
		t.stats[decider] = s
	}
	return s
}

// Emit records an envelope emitted by decider and returns the hatches it
// suppresses. Emitting an envelope already open or resolved changes
// nothing (two byte-identical envelopes are one, §12.5) and reports false.
func (t *Tracker) Emit(decider string, env *Envelope) (suppressed []string, fresh bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.open[env.Digest]; ok {
		return env.Suppressed(), false
	}
	if _, ok := t.resolved[env.Digest]; ok {
		return env.Suppressed(), false
	}
	t.open[env.Digest] = &emitted{env, decider}
	s := t.statsOf(decider)
	s.Emitted++
	if sup := env.Suppressed(); len(sup) > 0 {
		s.HatchesOff++
		return sup, true
	}
	return nil, true
}

// Envelope returns an open envelope by digest.
func (t *Tracker) Envelope(d canon.Digest) (*Envelope, string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.open[d]
	if !ok {
		return nil, "", false
	}
	return e.env, e.decider, true
}

// Resolve verifies r against the open envelope it names and, when it is a
// resolution of it, closes the envelope: it can never be resolved again.
// A resolution naming an unknown or already resolved envelope is
// discarded (Verdict.OK false).
func (t *Tracker) Resolve(r *Resolution, action []byte) Verdict {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.open[r.EnvelopeDigest]
	if !ok {
		v := Verdict{Resolution: r.Kind, Findings: []Finding{}}
		if k, done := t.resolved[r.EnvelopeDigest]; done {
			v.Findings = append(v.Findings, Finding{CodeAlreadyResolved, fmt.Sprintf("envelope %s was already resolved (%s); this resolution is discarded", r.EnvelopeDigest, k)})
		} else {
			v.Findings = append(v.Findings, Finding{CodeUnknownEnvelope, fmt.Sprintf("no open envelope %s; this resolution is discarded", r.EnvelopeDigest)})
		}
		return v
	}
	v := Verify(e.env, r, action)
	if !v.OK {
		return v
	}
	delete(t.open, r.EnvelopeDigest)
	t.resolved[r.EnvelopeDigest] = r.Kind
	s := t.statsOf(e.decider)
	s.Resolved[r.Kind]++
	if r.Kind == KindQuestion {
		s.QuestionVetoes++
	}
	return v
}

// Stats returns a copy of every decider's counts.
func (t *Tracker) Stats() map[string]DeciderStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]DeciderStats, len(t.stats))
	for k, s := range t.stats {
		c := *s
		c.Resolved = make(map[Kind]int, len(s.Resolved))
		for kk, n := range s.Resolved {
			c.Resolved[kk] = n
		}
		out[k] = c
	}
	return out
}

// Codes lists every finding code of the package (docs/ERRORS.md).
var Codes = []string{CodeProfile, CodeNotObject, CodeMissing, CodeUnknown, CodeType, CodeBlank, CodeOptionsCount,
	CodeRecommendedIdx, CodeActionDigest, CodeResolutionProfile, CodeResolutionShape, CodeResolutionKind,
	CodeEnvelopeDigest, CodeEnvelopeMismatch, CodeOptionRange, CodeUnknownEnvelope, CodeAlreadyResolved,
	CodeActionMismatch, CodeNotAuthority, CodeNoActionToCompare}
