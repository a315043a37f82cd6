package events

import (
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/parley-engine/parley/canon"
)

// Validator checks artifacts. The zero configuration (NewValidator with no
// options) accepts exactly protocol version 0.1.
type Validator struct {
	canonOpts  []canon.Option
	compatible map[string]bool
	pool       sync.Pool
}

// Option configures a Validator.
type Option func(*Validator)

// WithCanonOptions sets the limits of the canonical profile (see canon).
func WithCanonOptions(opts ...canon.Option) Option {
	return func(v *Validator) { v.canonOpts = append(v.canonOpts, opts...) }
}

// WithCompatibleVersion registers an explicit compatibility rule: artifacts
// of version (another 0.x minor) are read with the 0.1 semantics. Without
// one, any other version is rejected (no inferred minor compatibility).
func WithCompatibleVersion(version string) Option {
	return func(v *Validator) { v.compatible[version] = true }
}

// NewValidator returns a Validator. It is safe for concurrent use.
func NewValidator(opts ...Option) *Validator {
	v := &Validator{compatible: map[string]bool{}}
	for _, o := range opts {
		o(v)
	}
	v.pool.New = func() any { return canon.New(canon.AMD, v.canonOpts...) }
	return v
}

var defaultValidator = NewValidator()

// Validate checks raw as a published artifact (profile, identifier and
// semantics) and returns it typed. Errors are *canon.Error for the profile
// and the identifier, *Error for versions and semantics. Relation
// applicability needs the targets and is checked by CheckRelation.
func Validate(raw []byte) (*Artifact, error) { return defaultValidator.Validate(raw) }

// Validate is the package-level Validate with v's configuration.
func (v *Validator) Validate(raw []byte) (*Artifact, error) { return v.validate(raw, true) }

// ValidateTransient is Validate for callers that do not keep the
// canonical bytes (the projector keeps artifacts in the stream): the
// returned artifact's Canonical is nil, which saves a copy per artifact.
func (v *Validator) ValidateTransient(raw []byte) (*Artifact, error) { return v.validate(raw, false) }

func (v *Validator) validate(raw []byte, keep bool) (*Artifact, error) {
	c := v.pool.Get().(*canon.Canonicalizer)
	defer v.pool.Put(c)
	canonical, id, err := c.Verify(raw)
	if err != nil {
		return nil, err
	}
	a := &Artifact{ID: id, Canonical: canonical}
	if keep {
		a.Canonical = append([]byte(nil), canonical...)
	}
	if err := v.semantics(a, c.TopMembers()); err != nil {
		return nil, err
	}
	if !keep {
		// Extension values point into the canonicalizer's buffer, which
		// goes back to the pool.
		for k, val := range a.Extensions {
			a.Extensions[k] = append([]byte(nil), val...)
		}
		a.Canonical = nil
	}
	return a, nil
}

// semantics reads a.Canonical into a, checking the artifact rules
// (docs/ERRORS.md). top is where the canonicalizer found the top-level
// members, when it knows (nil: they are read from the bytes).
func (v *Validator) semantics(a *Artifact, top []canon.Member) error {
	var version, typ, payload, refs, exts []byte
	member := func(name, val []byte) error {
		switch string(name) {
		case "protocol_version":
			version = val
		case "artifact_type":
			typ = val
		case "payload":
			payload = val
		case "references":
			refs = val
		case "extensions":
			exts = val
		case "artifact_id":
		default:
			return fail(ErrUnknownMember, "/"+pointerEscape(unquote(name)), strconv.Quote(string(name)))
		}
		return nil
	}
	var err error
	if top != nil {
		b := a.Canonical
		for _, m := range top {
			if err = member(b[m.NameStart:m.NameEnd], b[m.ValueStart:m.ValueEnd]); err != nil {
				break
			}
		}
	} else {
		err = members(a.Canonical, member)
	}
	if err != nil {
		return err
	}
	// The version decides how to read the rest, so it comes first.
	switch {
	case version == nil:
		return fail(ErrVersionMissing, "/protocol_version", "")
	case kindOf(version) != '"':
		return fail(ErrVersionNotString, "/protocol_version", "")
	}
	if string(version) == `"`+ProtocolVersion+`"` {
		a.Version = ProtocolVersion
	} else {
		a.Version = str(version)
		if err := v.checkVersion(a.Version); err != nil {
			return err
		}
	}
	for _, m := range []struct {
		name string
		val  []byte
		kind byte
	}{{"artifact_type", typ, '"'}, {"payload", payload, '{'}, {"references", refs, '['}} {
		if m.val == nil {
			return fail(ErrMissingMember, "/"+m.name, m.name)
		}
		if kindOf(m.val) != m.kind {
			return fail(ErrWrongType, "/"+m.name, m.name+" must be "+kindName(m.kind))
		}
	}
	a.Type = typeOf(typ)
	if !a.Type.Valid() {
		return fail(ErrUnknownType, "/artifact_type", strconv.Quote(string(a.Type)))
	}
	if exts != nil {
		if kindOf(exts) != '{' {
			return fail(ErrWrongType, "/extensions", "extensions must be an object")
		}
		if err := readExtensions(a, exts); err != nil {
			return err
		}
	}
	if err := readReferences(a, refs); err != nil {
		return err
	}
	return readPayload(a, payload)
}

// typeOf reads an artifact_type, returning the constant for known types so
// that none allocates.
func typeOf(v []byte) Type {
	for _, t := range Types {
		if len(v) == len(t)+2 && string(v[1:len(v)-1]) == string(t) {
			return t
		}
	}
	return Type(str(v))
}

// relationOf reads a relation the same way.
func relationOf(v []byte) Relation {
	for _, r := range []Relation{Supports, ObjectsTo, Revises, Supersedes, Considers, Decides} {
		if len(v) == len(r)+2 && string(v[1:len(v)-1]) == string(r) {
			return r
		}
	}
	return Relation(str(v))
}

func kindName(k byte) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	}
	return "a " + string(k)
}

// checkVersion applies the version rule (docs/ERRORS.md): 0.1, or a registered compatible minor.
func (v *Validator) checkVersion(s string) error {
	major, minor, ok := strings.Cut(s, ".")
	if !ok || !digits(major) || !digits(minor) {
		return fail(ErrVersionMalformed, "/protocol_version", strconv.Quote(s))
	}
	if s == ProtocolVersion || v.compatible[s] {
		return nil
	}
	if strings.TrimLeft(major, "0") != "" {
		return fail(ErrVersionUnsupportedMajor, "/protocol_version", strconv.Quote(s))
	}
	return fail(ErrVersionUnsupportedMinor, "/protocol_version", strconv.Quote(s))
}

func digits(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func readExtensions(a *Artifact, exts []byte) error {
	return members(exts, func(name, val []byte) error {
		n := unquote(name)
		dot := strings.IndexByte(n, '.')
		if dot <= 0 || dot == len(n)-1 {
			return fail(ErrExtensionNamespace, "/extensions/"+pointerEscape(n), strconv.Quote(n))
		}
		if a.Extensions == nil {
			a.Extensions = map[string][]byte{}
		}
		a.Extensions[n] = val
		return nil
	})
}

func readReferences(a *Artifact, refs []byte) error {
	type pair struct {
		t canon.Digest
		r Relation
	}
	var seen map[pair]bool
	return items(refs, func(i int, val []byte) error {
		// The member's JSON pointer, written only for an error.
		path := func(rest string) string { return "/references/" + strconv.Itoa(i) + rest }
		if kindOf(val) != '{' {
			return fail(ErrReferenceNotObject, path(""), "")
		}
		var ref Reference
		var haveID bool
		err := members(val, func(name, v []byte) error {
			switch string(name) {
			case "artifact_id":
				haveID = true
				if kindOf(v) != '"' {
					return fail(ErrReferenceInvalidID, path("/artifact_id"), "not a string")
				}
				d, ok := canon.ParseDigestBytes(v[1 : len(v)-1])
				if !ok {
					return fail(ErrReferenceInvalidID, path("/artifact_id"), strconv.Quote(str(v)))
				}
				ref.Target = d
			case "relation":
				if kindOf(v) != '"' {
					return fail(ErrReferenceUnknownRel, path("/relation"), "not a string")
				}
				ref.Relation = relationOf(v)
				if ref.Relation == NoRelation || !ref.Relation.Valid() {
					return fail(ErrReferenceUnknownRel, path("/relation"), strconv.Quote(string(ref.Relation)))
				}
			default:
				return fail(ErrReferenceUnknownMember, path("/"+pointerEscape(unquote(name))), strconv.Quote(string(name)))
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !haveID {
			return fail(ErrReferenceMissingID, path(""), "")
		}
		dup := false
		if len(a.References) < 16 {
			for _, r := range a.References {
				if r == ref {
					dup = true
				}
			}
		} else {
			if seen == nil {
				seen = make(map[pair]bool, len(a.References))
				for _, r := range a.References {
					seen[pair{r.Target, r.Relation}] = true
				}
			}
			p := pair{ref.Target, ref.Relation}
			dup = seen[p]
			seen[p] = true
		}
		if dup {
			return fail(ErrReferenceDuplicate, path(""), ref.Target.String()+" "+string(ref.Relation))
		}
		a.References = append(a.References, ref)
		return nil
	})
}

// fields holds a payload's members in canonical order. Payloads are small,
// so a linear lookup beats a map and allocates nothing per member.
type fields []field

type field struct{ name, val []byte }

// readFields reads the members of the canonical object obj into f (which
// the caller passes empty, usually over an array of its own, so that a
// small object needs no allocation).
func readFields(f fields, obj []byte) fields {
	for i := 1; obj[i] != '}'; {
		if obj[i] == ',' {
			i++
		}
		ne := end(obj, i)
		ve := end(obj, ne+1)
		f = append(f, field{obj[i+1 : ne-1], obj[ne+1 : ve]})
		i = ve
	}
	return f
}

// get returns the value of the member named name (names without escapes
// only, which every name parley looks up is).
func (f fields) get(name string) ([]byte, bool) {
	for _, e := range f {
		if string(e.name) == name {
			return e.val, true
		}
	}
	return nil, false
}

// text reads a required non-blank string member.
func (f fields) text(name string, missing, invalid *Error) (string, error) {
	v, ok := f.get(name)
	if !ok {
		return "", fail(missing, "/payload/"+name, "")
	}
	if kindOf(v) != '"' {
		return "", fail(invalid, "/payload/"+name, "not a string")
	}
	s := str(v)
	if blank(s) {
		return "", fail(invalid, "/payload/"+name, "blank")
	}
	return s, nil
}

// boolean reads a required Boolean member.
func (f fields) boolean(name string, missing, invalid *Error) (bool, error) {
	v, ok := f.get(name)
	if !ok {
		return false, fail(missing, "/payload/"+name, "")
	}
	switch kindOf(v) {
	case 't':
		return true, nil
	case 'f':
		return false, nil
	}
	return false, fail(invalid, "/payload/"+name, "")
}

// blank reports whether s has no non-space character.
func blank(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return !unicode.IsSpace(r) }) < 0
}

func (a *Artifact) hasRelation(rels ...Relation) bool {
	for _, r := range a.References {
		for _, want := range rels {
			if r.Relation == want {
				return true
			}
		}
	}
	return false
}

func readPayload(a *Artifact, obj []byte) error {
	var buf [8]field
	f := readFields(buf[:0], obj)
	var err error
	switch a.Type {
	case TypeClaim:
		p := &Claim{}
		if p.Statement, err = f.text("statement", ErrMissingStatement, ErrInvalidStatement); err != nil {
			return err
		}
		a.Payload = p
	case TypeEvidence:
		p := &Evidence{}
		if p.Content, err = f.text("content", ErrMissingContent, ErrInvalidContent); err != nil {
			return err
		}
		v, ok := f.get("provenance_class")
		if !ok {
			return fail(ErrMissingProvenance, "/payload/provenance_class", "")
		}
		if kindOf(v) != '"' || !ProvenanceClass(str(v)).Valid() {
			return fail(ErrInvalidProvenance, "/payload/provenance_class", string(v))
		}
		p.ProvenanceClass = ProvenanceClass(str(v))
		if !a.hasRelation(Supports) {
			return fail(ErrMissingSupports, "/references", "")
		}
		a.Payload = p
	case TypeObjection:
		p := &Objection{}
		if p.Statement, err = f.text("statement", ErrMissingStatement, ErrInvalidStatement); err != nil {
			return err
		}
		if p.Blocking, err = f.boolean("blocking", ErrMissingBlocking, ErrInvalidBlocking); err != nil {
			return err
		}
		if !a.hasRelation(ObjectsTo) {
			return fail(ErrMissingObjectsTo, "/references", "")
		}
		a.Payload = p
	case TypeRevision:
		p := &RevisionPayload{}
		if p.Statement, err = f.text("statement", ErrMissingStatement, ErrInvalidStatement); err != nil {
			return err
		}
		if !a.hasRelation(Revises, Supersedes) {
			return fail(ErrMissingRevises, "/references", "")
		}
		a.Payload = p
	case TypeDecision:
		p, err := readDecision(f)
		if err != nil {
			return err
		}
		a.Payload = p
	case TypeFailure:
		p := &Failure{}
		if p.Code, err = f.text("code", ErrMissingCode, ErrInvalidCode); err != nil {
			return err
		}
		if p.Description, err = f.text("description", ErrMissingDescription, ErrInvalidDescription); err != nil {
			return err
		}
		if p.Retryable, err = f.boolean("retryable", ErrMissingRetryable, ErrInvalidRetryable); err != nil {
			return err
		}
		a.Payload = p
	case TypeTermination:
		p, err := readTermination(a, f)
		if err != nil {
			return err
		}
		a.Payload = p
	}
	return nil
}

func readDecision(f fields) (*Decision, error) {
	p := &Decision{}
	var err error
	if p.Outcome, err = f.text("outcome", ErrMissingOutcome, ErrInvalidOutcome); err != nil {
		return nil, err
	}
	st, ok := f.get("status")
	if !ok {
		return nil, fail(ErrMissingStatus, "/payload/status", "")
	}
	if kindOf(st) != '"' || (str(st) != string(Provisional) && str(st) != string(Final)) {
		return nil, fail(ErrInvalidStatus, "/payload/status", string(st))
	}
	p.Status = DecisionStatus(str(st))

	ds, ok := f.get("objection_dispositions")
	if !ok {
		return nil, fail(ErrMissingDispositions, "/payload/objection_dispositions", "")
	}
	if kindOf(ds) != '[' {
		return nil, fail(ErrInvalidDispositions, "/payload/objection_dispositions", "")
	}
	p.ObjectionDispositions = []Disposition{}
	seen := map[canon.Digest]bool{}
	err = items(ds, func(i int, v []byte) error {
		path := "/payload/objection_dispositions/" + strconv.Itoa(i)
		if kindOf(v) != '{' {
			return fail(ErrInvalidDisposition, path, "not an object")
		}
		var buf [8]field
		e := readFields(buf[:0], v)
		var d Disposition
		var ok bool
		if d.Objection, ok = digestField(e, "objection"); !ok {
			return fail(ErrInvalidDisposition, path+"/objection", "missing or not an artifact id")
		}
		k, has := e.get("disposition")
		if !has || kindOf(k) != '"' || !DispositionKind(str(k)).valid() {
			return fail(ErrInvalidDisposition, path+"/disposition", "missing or unknown")
		}
		d.Disposition = DispositionKind(str(k))
		r, has := e.get("rationale")
		if !has || kindOf(r) != '"' || blank(str(r)) {
			return fail(ErrInvalidDisposition, path+"/rationale", "missing or blank")
		}
		d.Rationale = str(r)
		if by, has := e.get("by"); has {
			if kindOf(by) != '[' {
				return fail(ErrInvalidDisposition, path+"/by", "not an array")
			}
			err := items(by, func(j int, v []byte) error {
				if kindOf(v) != '"' {
					return fail(ErrInvalidDisposition, path+"/by/"+strconv.Itoa(j), "not an artifact id")
				}
				id, ok := canon.ParseDigest(str(v))
				if !ok {
					return fail(ErrInvalidDisposition, path+"/by/"+strconv.Itoa(j), "not an artifact id")
				}
				d.By = append(d.By, id)
				return nil
			})
			if err != nil {
				return err
			}
		}
		if seen[d.Objection] {
			return fail(ErrDuplicateDisposition, path+"/objection", d.Objection.String())
		}
		seen[d.Objection] = true
		p.ObjectionDispositions = append(p.ObjectionDispositions, d)
		return nil
	})
	if err != nil {
		return nil, err
	}

	us, ok := f.get("unresolved_issues")
	if !ok {
		return nil, fail(ErrMissingUnresolved, "/payload/unresolved_issues", "")
	}
	if kindOf(us) != '[' {
		return nil, fail(ErrInvalidUnresolved, "/payload/unresolved_issues", "")
	}
	p.UnresolvedIssues = []Issue{}
	err = items(us, func(i int, v []byte) error {
		path := "/payload/unresolved_issues/" + strconv.Itoa(i)
		if kindOf(v) != '{' {
			return fail(ErrInvalidUnresolvedIssue, path, "not an object")
		}
		var buf [8]field
		e := readFields(buf[:0], v)
		d, has := e.get("description")
		if !has || kindOf(d) != '"' || blank(str(d)) {
			return fail(ErrInvalidUnresolvedIssue, path+"/description", "missing or blank")
		}
		issue := Issue{Description: str(d)}
		if _, has := e.get("objection"); has {
			id, ok := digestField(e, "objection")
			if !ok {
				return fail(ErrInvalidUnresolvedIssue, path+"/objection", "not an artifact id")
			}
			issue.Objection = &id
		}
		p.UnresolvedIssues = append(p.UnresolvedIssues, issue)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func digestField(f fields, name string) (canon.Digest, bool) {
	v, ok := f.get(name)
	if !ok || kindOf(v) != '"' {
		return canon.Digest{}, false
	}
	return canon.ParseDigestBytes(v[1 : len(v)-1])
}

func readTermination(a *Artifact, f fields) (*Termination, error) {
	p := &Termination{}
	st, ok := f.get("state")
	if !ok {
		return nil, fail(ErrMissingState, "/payload/state", "")
	}
	p.State = TerminationState(str(st))
	if kindOf(st) != '"' || !p.State.valid() {
		return nil, fail(ErrInvalidState, "/payload/state", string(st))
	}
	if r, ok := f.get("reason"); ok && kindOf(r) == '"' {
		p.Reason = str(r)
	}
	if p.State == Completed && !a.hasRelation(Decides) {
		return nil, fail(ErrMissingDecides, "/references", "")
	}
	if list, ok := f.get("unresolved_objections"); ok {
		if p.State != Deadlock && p.State != Exhausted {
			return nil, fail(ErrUnresolvedOnlyTerminal, "/payload/unresolved_objections", string(p.State))
		}
		if kindOf(list) != '[' {
			return nil, fail(ErrInvalidUnresolvedList, "/payload/unresolved_objections", "")
		}
		considered := map[canon.Digest]bool{}
		for _, r := range a.References {
			if r.Relation == Considers {
				considered[r.Target] = true
			}
		}
		err := items(list, func(i int, v []byte) error {
			path := "/payload/unresolved_objections/" + strconv.Itoa(i)
			if kindOf(v) != '"' {
				return fail(ErrInvalidUnresolvedList, path, "")
			}
			id, ok := canon.ParseDigest(str(v))
			if !ok {
				return fail(ErrInvalidUnresolvedList, path, strconv.Quote(str(v)))
			}
			if !considered[id] {
				return fail(ErrUnreferencedUnresolved, path, id.String())
			}
			p.UnresolvedObjections = append(p.UnresolvedObjections, id)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}
