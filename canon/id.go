package canon

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
)

// Digest is a SHA-256 digest. Its text form is "sha256:" and 64 lowercase
// hexadecimal digits, the form of artifact ids and JCS digests alike.
type Digest [sha256.Size]byte

// DigestPrefix starts every digest's text form.
const DigestPrefix = "sha256:"

// String returns "sha256:<64 lowercase hex>".
func (d Digest) String() string { return string(d.AppendText(nil)) }

// AppendText appends the text form to b.
func (d Digest) AppendText(b []byte) []byte {
	b = append(b, DigestPrefix...)
	return hex.AppendEncode(b, d[:])
}

// MarshalText implements encoding.TextMarshaler.
func (d Digest) MarshalText() ([]byte, error) { return d.AppendText(nil), nil }

// UnmarshalText implements encoding.TextUnmarshaler; it accepts exactly the
// canonical text form.
func (d *Digest) UnmarshalText(b []byte) error {
	p, ok := ParseDigest(string(b))
	if !ok {
		return &Error{Class: InvalidIdentifierSyntax, Code: ErrIDSyntax.Code, Offset: -1, Msg: ErrIDSyntax.Msg}
	}
	*d = p
	return nil
}

// ParseDigest parses "sha256:<64 lowercase hex>". Uppercase hex, other
// prefixes and other lengths are refused.
func ParseDigest(s string) (Digest, bool) {
	var d Digest
	if !ValidID(s) {
		return d, false
	}
	_, err := hex.Decode(d[:], []byte(s[len(DigestPrefix):]))
	return d, err == nil
}

// ParseDigestBytes is ParseDigest over bytes, without allocating.
func ParseDigestBytes(b []byte) (Digest, bool) {
	var d Digest
	if len(b) != len(DigestPrefix)+64 || string(b[:len(DigestPrefix)]) != DigestPrefix {
		return d, false
	}
	h := b[len(DigestPrefix):]
	var bad byte
	for i := range 32 {
		hi, lo := hexVal[h[2*i]], hexVal[h[2*i+1]]
		bad |= hi | lo
		d[i] = hi<<4 | lo&0x0f
	}
	if bad&0xf0 != 0 {
		return Digest{}, false
	}
	return d, true
}

// hexVal is the value of a lowercase hex digit, 0xff for any other byte.
var hexVal = func() (t [256]byte) {
	for i := range t {
		if v, ok := lowerHex(byte(i)); ok {
			t[i] = v
		} else {
			t[i] = 0xff
		}
	}
	return t
}()

func lowerHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// ValidID reports whether s matches ^sha256:[0-9a-f]{64}$.
func ValidID(s string) bool {
	if len(s) != len(DigestPrefix)+64 || s[:len(DigestPrefix)] != DigestPrefix {
		return false
	}
	for i := len(DigestPrefix); i < len(s); i++ {
		b := s[i]
		if !(b >= '0' && b <= '9' || b >= 'a' && b <= 'f') {
			return false
		}
	}
	return true
}

func (c *Canonicalizer) hasher() hash.Hash {
	if c.h == nil {
		c.h = sha256.New()
	}
	c.h.Reset()
	return c.h
}

// Digest canonicalizes src and returns the SHA-256 of the whole canonical
// form (the JCS envelope and action digest; for AMD, see ID instead). The
// returned canonical bytes belong to the Canonicalizer and are valid until
// its next call.
func (c *Canonicalizer) Digest(src []byte) (canonical []byte, d Digest, err error) {
	if err := c.run(src); err != nil {
		return nil, d, err
	}
	return c.out, sha256.Sum256(c.out), nil
}

// ID canonicalizes src under the AMD profile and returns its artifact id:
// SHA-256 over the canonical form with exactly the top-level artifact_id
// member removed (nested ones stay). src must be a top-level object. The
// returned canonical bytes are those of the whole input, artifact_id
// included; they belong to the Canonicalizer and are valid until its next
// call, or, when src is already canonical, they are src itself (fast.go).
// ID(x) == ID(Canonicalize(x)) for every accepted x.
func (c *Canonicalizer) ID(src []byte) (canonical []byte, id Digest, err error) {
	if c.fast(src) {
		// Already canonical (fast.go): the input is its canonical form.
		return src, c.idDigest(src), nil
	}
	if err := c.run(src); err != nil {
		return nil, id, err
	}
	if !c.topObject {
		return nil, id, at(ErrTopLevel, c.topOff, "")
	}
	return c.out, c.idDigest(c.out), nil
}

// idDigest hashes the canonical form out without the top-level artifact_id
// member.
func (c *Canonicalizer) idDigest(out []byte) Digest {
	var d Digest
	if c.idStart < 0 {
		return sha256.Sum256(out)
	}
	s, e := c.idStart, c.idEnd
	if out[s-1] == ',' {
		s-- // drop the comma before it
	} else if out[e] == ',' {
		e++ // first member: drop the comma after it
	}
	h := c.hasher()
	h.Write(out[:s])
	h.Write(out[e:])
	c.sum = h.Sum(c.sum[:0])
	copy(d[:], c.sum)
	return d
}

// Verify checks src as an artifact under the AMD profile: it must be a
// top-level object with an artifact_id string of the form
// sha256:<64 lowercase hex> equal to the id recomputed from the content.
func (c *Canonicalizer) Verify(src []byte) (canonical []byte, id Digest, err error) {
	canonical, id, err = c.ID(src)
	if err != nil {
		return nil, id, err
	}
	if c.idStart < 0 {
		return nil, id, at(ErrIDMissing, 0, "")
	}
	v := canonical[c.idStart+len(`"artifact_id":`) : c.idEnd]
	if v[0] != '"' {
		return nil, id, at(ErrIDNotString, c.idSrcOff, "")
	}
	got, ok := ParseDigestBytes(v[1 : len(v)-1])
	if !ok {
		return nil, id, at(ErrIDSyntax, c.idSrcOff, "")
	}
	if got != id {
		return nil, id, at(ErrIDMismatch, c.idSrcOff, "content hashes to "+id.String())
	}
	return canonical, id, nil
}

var pools = [...]sync.Pool{
	AMD: {New: func() any { return New(AMD) }},
	JCS: {New: func() any { return New(JCS) }},
}

func get(p Profile) *Canonicalizer { return pools[p].Get().(*Canonicalizer) }
func put(c *Canonicalizer)         { pools[c.profile].Put(c) }

// Canonicalize returns the canonical form of src under profile p with the
// default limits.
func Canonicalize(p Profile, src []byte) ([]byte, error) {
	if p != JCS {
		p = AMD
	}
	c := get(p)
	defer put(c)
	return c.Append(nil, src)
}

// ID returns the artifact id of src (AMD profile, default limits).
func ID(src []byte) (Digest, error) {
	c := get(AMD)
	defer put(c)
	_, d, err := c.ID(src)
	return d, err
}

// Verify verifies the artifact_id of src (AMD profile, default limits) and
// returns it.
func Verify(src []byte) (Digest, error) {
	c := get(AMD)
	defer put(c)
	_, d, err := c.Verify(src)
	return d, err
}

// JCSDigest returns the digest of the JCS canonical form of src and that
// form's length (default bounds).
func JCSDigest(src []byte) (Digest, int, error) {
	c := get(JCS)
	defer put(c)
	b, d, err := c.Digest(src)
	return d, len(b), err
}

// AppendString appends s to dst as a JSON string with the canonical escapes
// of both profiles: the short escapes for " \ \b \f \n \r \t, lowercase
// \u00xx for the other C0 controls, everything else as it is. s must be
// valid UTF-8 for the result to be valid JSON.
func AppendString(dst []byte, s []byte) []byte {
	c := Canonicalizer{out: append(dst, '"')}
	c.appendEscaped(s)
	return append(c.out, '"')
}
