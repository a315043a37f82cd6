// Package provenance is the substrate-provenance grammar of seed 003
// (draft-morrison-substrate-provenance-grammar-03): the closed version-1.0
// vocabulary of substrate classes, the two terminal annotations, the
// per-assertion annotations in their two encodings, and the admissibility
// discipline a relying party applies before it counts an annotation.
//
// The package is pure: it reads no file and starts no process.
// Re-verification against a substrate is a function the caller passes in
// (Verifier; package substrate has the local one), and a fold takes its
// results as an input computed ahead of it (Reverify, AdmitReverified):
// the discipline only says what may be counted.
package provenance

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/parley-engine/parley/canon"
)

// Vocabulary is the version anchor of the vocabulary this build knows.
const Vocabulary = "1.0"

// The version-1.0 closed vocabulary (§3) and the terminal annotations (§4).
const (
	GitLog         = "substrate.git.log"
	Grep           = "substrate.grep"
	CodeRead       = "substrate.code.read"
	FSMtime        = "substrate.fs.mtime"
	MCPBrief       = "substrate.mcp.brief"
	SSECount       = "substrate.do.sse-count"
	UnixPeercred   = "substrate.unix.peercred"
	Unverified     = "unverified-inference"
	DecayedToUncer = "decayed-to-uncertainty"
)

// Classes is the version-1.0 vocabulary: the eight identifiers of §3.
var Classes = []string{GitLog, Grep, CodeRead, FSMtime, MCPBrief, SSECount, UnixPeercred, Unverified}

// Extension is the name of the artifact extension that carries annotations.
const Extension = "parley.provenance"

// Annotation is one provenance annotation (§5): the assertion it is
// attached to, the substrate-class identifier as written, and the optional
// observation id and timestamp.
type Annotation struct {
	Assertion     string     `json:"assertion"`
	Class         string     `json:"substrate_class"`
	ObservationID string     `json:"observation_id,omitempty"`
	TS            *time.Time `json:"ts,omitempty"`
	// Locator says where on the substrate the observation was made, so
	// that a relying party can re-query it (parley's addition; seed 003
	// leaves the concrete encoding to the implementation).
	Locator *Locator `json:"locator,omitempty"`
}

// Locator names the place an observation was made: a path under the
// relying party's roots, a line region, a pattern, a repository and a
// reference. Which members a class reads is in docs/PROVENANCE.md:
//
//   - substrate.code.read: path, offset (first line, 1-based), limit
//     (lines); the observation id is sha256: of the bytes read.
//   - substrate.grep: path, pattern (RE2), offset, limit; the observation
//     id is sha256: of the matching lines as grep -n prints them.
//   - substrate.git.log: repo (a directory under a root, default "."),
//     ref, and optionally path and pattern; the observation id is the
//     commit id.
//   - substrate.fs.mtime: path; the observation id is the modification
//     time in RFC 3339.
type Locator struct {
	Path    string `json:"path,omitempty"`
	Offset  int    `json:"offset,omitempty"`
	Limit   int    `json:"limit,omitempty"`
	Pattern string `json:"pattern,omitempty"`
	Repo    string `json:"repo,omitempty"`
	Ref     string `json:"ref,omitempty"`
}

// Terminal reports whether class is one of the two terminal annotations.
func Terminal(class string) bool { return class == Unverified || class == DecayedToUncer }

// Known reports whether class is recognised by the version-1.0 vocabulary
// (the eight identifiers, plus decayed-to-uncertainty, the second terminal
// annotation of §4, which appears in the same slot).
func Known(class string) bool { return slices.Contains(Classes, class) || class == DecayedToUncer }

// Effective returns the class an annotation counts as under vocabulary v
// (its version anchor): an identifier this build does not recognise is
// treated as unverified-inference (§3), and so is every identifier of a
// vocabulary with another major version (classes may have been removed).
func Effective(class, vocabulary string) string {
	if major(vocabulary) != major(Vocabulary) || !Known(class) {
		return Unverified
	}
	return class
}

func major(v string) string { m, _, _ := strings.Cut(v, "."); return m }

// Set is the value of the parley.provenance extension.
type Set struct {
	Vocabulary  string       `json:"vocabulary"`
	Annotations []Annotation `json:"annotations"`
}

// Error is a malformed annotation set, with a stable code.
type Error struct {
	Code, Message string
}

func (e *Error) Error() string { return "provenance: " + e.Message + " (" + e.Code + ")" }

// ErrMalformed matches every *Error with errors.Is.
var ErrMalformed = errors.New("provenance: malformed")

func (e *Error) Is(target error) bool { return target == ErrMalformed }

func bad(code, format string, a ...any) error {
	return &Error{code, fmt.Sprintf(format, a...)}
}

// ParseSet parses the parley.provenance extension strictly: exactly the
// members vocabulary and annotations; each annotation exactly assertion,
// substrate_class and the optional observation_id, ts (RFC 3339) and
// locator.
// Unknown identifiers are not errors: they count as unverified-inference.
func ParseSet(raw []byte) (*Set, error) {
	var top map[string]json.RawMessage
	if err := strictObject(raw, &top); err != nil {
		return nil, err
	}
	for k := range top {
		if k != "vocabulary" && k != "annotations" {
			return nil, bad("provenance.unknown_member", "unknown member %q", k)
		}
	}
	var s Set
	if err := json.Unmarshal(top["vocabulary"], &s.Vocabulary); err != nil || !validAnchor(s.Vocabulary) {
		return nil, bad("provenance.vocabulary", "vocabulary must be a major.minor version anchor such as \"1.0\"")
	}
	var anns []json.RawMessage
	if err := json.Unmarshal(top["annotations"], &anns); err != nil || top["annotations"] == nil {
		return nil, bad("provenance.annotations", "annotations must be an array")
	}
	for i, a := range anns {
		var m map[string]json.RawMessage
		if err := strictObject(a, &m); err != nil {
			return nil, bad("provenance.annotation", "annotations[%d] is not an object", i)
		}
		var an Annotation
		for k, v := range m {
			if k == "locator" {
				loc, err := parseLocator(v)
				if err != nil {
					return nil, bad("provenance.locator", "annotations[%d].locator: %v", i, err)
				}
				an.Locator = loc
				continue
			}
			var str string
			if json.Unmarshal(v, &str) != nil {
				return nil, bad("provenance.annotation", "annotations[%d].%s must be a string", i, k)
			}
			switch k {
			case "assertion":
				an.Assertion = str
			case "substrate_class":
				an.Class = str
			case "observation_id":
				an.ObservationID = str
			case "ts":
				t, err := time.Parse(time.RFC3339Nano, str)
				if err != nil {
					return nil, bad("provenance.ts", "annotations[%d].ts %q is not an RFC 3339 time", i, str)
				}
				an.TS = &t
			default:
				return nil, bad("provenance.unknown_member", "annotations[%d] has an unknown member %q", i, k)
			}
		}
		if strings.TrimSpace(an.Assertion) == "" || an.Class == "" {
			return nil, bad("provenance.annotation", "annotations[%d] needs an assertion and a substrate_class", i)
		}
		s.Annotations = append(s.Annotations, an)
	}
	return &s, nil
}

// strictObject decodes raw, a JSON object, after canon's strict parser has
// checked it (duplicate members after escape decoding, invalid UTF-8,
// numbers outside the profile are refused, never repaired).
func strictObject(raw []byte, into *map[string]json.RawMessage) error {
	if err := strict(raw); err != nil {
		return err
	}
	if json.Unmarshal(raw, into) != nil || *into == nil {
		return bad("provenance.not_object", "not a JSON object")
	}
	return nil
}

// maxLocatorString bounds a locator's strings (a path, a pattern, a ref).
const maxLocatorString = 4096

func parseLocator(raw []byte) (*Locator, error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, errors.New("not an object")
	}
	var l Locator
	for k, v := range m {
		switch k {
		case "offset", "limit":
			var n int
			if json.Unmarshal(v, &n) != nil || n < 0 {
				return nil, fmt.Errorf("%s must be a non-negative integer", k)
			}
			if k == "offset" {
				l.Offset = n
			} else {
				l.Limit = n
			}
		case "path", "pattern", "repo", "ref":
			var str string
			if json.Unmarshal(v, &str) != nil || str == "" || len(str) > maxLocatorString {
				return nil, fmt.Errorf("%s must be a non-empty string of at most %d bytes", k, maxLocatorString)
			}
			switch k {
			case "path":
				l.Path = str
			case "pattern":
				l.Pattern = str
			case "repo":
				l.Repo = str
			default:
				l.Ref = str
			}
		default:
			return nil, fmt.Errorf("unknown member %q", k)
		}
	}
	return &l, nil
}

// strict checks raw with canon's strict parser.
func strict(raw []byte) error {
	if _, err := canon.Canonicalize(canon.JCS, raw); err != nil {
		if errors.Is(err, canon.ErrDuplicateName) {
			return bad("provenance.duplicate_member", "%v", err)
		}
		return bad("provenance.json", "%v", err)
	}
	return nil
}

func validAnchor(v string) bool {
	ma, mi, ok := strings.Cut(v, ".")
	if !ok {
		return false
	}
	_, e1 := strconv.ParseUint(ma, 10, 16)
	_, e2 := strconv.ParseUint(mi, 10, 16)
	return e1 == nil && e2 == nil
}

// ParseInline parses the in-line bracketed encoding of §5: each assertion
// is text followed by its annotation in brackets,
//
//	The file CHANGELOG.md contains an entry dated 2026-05-25.
//	[substrate.code.read; observation-id=sha256:…; ts=2026-05-28T11:40:00Z]
//
// The bracket's first element is the class; the others are
// observation-id=…, ts=… and the locator's path=…, offset=…, limit=…,
// pattern=…, repo=… and ref=…, each at most once. Whitespace and line
// breaks inside the brackets are ignored, so a value cannot hold
// whitespace, ";" or "]": use the JSON form for those.
func ParseInline(text string) ([]Annotation, error) {
	var out []Annotation
	rest := text
	for {
		open := strings.IndexByte(rest, '[')
		if open < 0 {
			if strings.TrimSpace(rest) != "" && len(out) == 0 {
				return nil, bad("provenance.inline", "no bracketed annotation")
			}
			return out, nil
		}
		closeAt := strings.IndexByte(rest[open:], ']')
		if closeAt < 0 {
			return nil, bad("provenance.inline", "an annotation bracket is not closed")
		}
		assertion := strings.Join(strings.Fields(rest[:open]), " ")
		body := rest[open+1 : open+closeAt]
		rest = rest[open+closeAt+1:]
		if assertion == "" {
			return nil, bad("provenance.inline", "an annotation without an assertion before it")
		}
		parts := strings.Split(body, ";")
		an := Annotation{Assertion: assertion, Class: strings.Join(strings.Fields(parts[0]), "")}
		if an.Class == "" {
			return nil, bad("provenance.inline", "an annotation without a substrate class")
		}
		seen := map[string]bool{}
		for _, p := range parts[1:] {
			p = strings.Join(strings.Fields(p), "")
			k, v, ok := strings.Cut(p, "=")
			if !ok || v == "" || seen[k] {
				return nil, bad("provenance.inline", "annotation element %q: want observation-id=… or ts=…, each once", p)
			}
			seen[k] = true
			switch k {
			case "observation-id":
				an.ObservationID = v
			case "ts":
				t, err := time.Parse(time.RFC3339Nano, v)
				if err != nil {
					return nil, bad("provenance.ts", "ts %q is not an RFC 3339 time", v)
				}
				an.TS = &t
			case "path", "pattern", "repo", "ref", "offset", "limit":
				if an.Locator == nil {
					an.Locator = &Locator{}
				}
				switch k {
				case "offset", "limit":
					n, err := strconv.Atoi(v)
					if err != nil || n < 0 {
						return nil, bad("provenance.locator", "%s=%s: want a non-negative integer", k, v)
					}
					if k == "offset" {
						an.Locator.Offset = n
					} else {
						an.Locator.Limit = n
					}
				case "path":
					an.Locator.Path = v
				case "pattern":
					an.Locator.Pattern = v
				case "repo":
					an.Locator.Repo = v
				default:
					an.Locator.Ref = v
				}
			default:
				return nil, bad("provenance.inline", "unknown annotation element %q", k)
			}
		}
		out = append(out, an)
	}
}

// ParseStructured parses the JSON-structured encoding of §5: one object
// {"assertion":…,"provenance":{"substrate_class":…,"observation_id":…,
// "ts":…}} or an array of them, strictly (the provenance object takes the
// same members as an annotation of the extension, locator included). The
// encoding carries no vocabulary anchor: it is read as this build's.
func ParseStructured(raw []byte) (*Set, error) {
	if err := strict(raw); err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if t := strings.TrimSpace(string(raw)); strings.HasPrefix(t, "[") {
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, bad("provenance.json", "%v", err)
		}
	} else {
		items = []json.RawMessage{raw}
	}
	anns := make([]json.RawMessage, 0, len(items))
	for i, it := range items {
		var m map[string]json.RawMessage
		if json.Unmarshal(it, &m) != nil || m == nil {
			return nil, bad("provenance.not_object", "item %d is not an object", i)
		}
		var p map[string]json.RawMessage
		if json.Unmarshal(m["provenance"], &p) != nil || p == nil {
			return nil, bad("provenance.annotation", "item %d needs a provenance object", i)
		}
		for k := range m {
			if k != "assertion" && k != "provenance" {
				return nil, bad("provenance.unknown_member", "item %d has an unknown member %q", i, k)
			}
		}
		if _, ok := p["assertion"]; ok {
			return nil, bad("provenance.unknown_member", "item %d: the assertion goes beside provenance, not in it", i)
		}
		p["assertion"] = m["assertion"]
		b, _ := json.Marshal(p)
		anns = append(anns, b)
	}
	b, _ := json.Marshal(map[string]any{"vocabulary": Vocabulary, "annotations": anns})
	return ParseSet(b)
}

// Parse reads annotations in either JSON form: the extension's
// ({"vocabulary":…,"annotations":[…]}) or the JSON-structured form (an
// object or an array of {"assertion":…,"provenance":{…}}).
func Parse(raw []byte) (*Set, error) {
	var probe map[string]json.RawMessage
	if json.Unmarshal(raw, &probe) == nil && (probe["vocabulary"] != nil || probe["annotations"] != nil) {
		return ParseSet(raw)
	}
	return ParseStructured(raw)
}
