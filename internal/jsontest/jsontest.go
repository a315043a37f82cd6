// Package jsontest writes JSON documents for tests.
package jsontest

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// WithID returns the object of the given members (each `"name":value`,
// names in order and without escapes) with a top-level artifact_id member
// holding the id of the rest (the SHA-256 of the object without it, which
// is canonical when the members are), in its place in the order.
func WithID(members ...string) string {
	body := "{" + strings.Join(members, ",") + "}"
	sum := sha256.Sum256([]byte(body))
	idm := `"artifact_id":"sha256:` + hex.EncodeToString(sum[:]) + `"`
	out := make([]string, 0, len(members)+1)
	placed := false
	for _, m := range members {
		name := m[1 : 1+strings.IndexByte(m[1:], '"')]
		if !placed && name > "artifact_id" {
			out = append(out, idm)
			placed = true
		}
		out = append(out, m)
	}
	if !placed {
		out = append(out, idm)
	}
	return "{" + strings.Join(out, ",") + "}"
}
