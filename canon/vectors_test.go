package canon_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/parley-engine/parley/canon"
)

// vector is one entry of testdata/vectors/canonical.json.
type vector struct {
	Name        string
	Profile     string
	Operation   string
	Input       *string
	InputHex    string `json:"input_hex"`
	InputRepeat *struct {
		Prefix, Unit, Suffix string
		Count                int
	} `json:"input_repeat"`
	Canonical       *string
	CanonicalSHA256 string `json:"canonical_sha256"`
	ArtifactID      string `json:"artifact_id"`
	Digest          string
	ErrorClass      string `json:"error_class"`
	Code            string

	input []byte
}

func loadVectors(tb testing.TB) []vector {
	tb.Helper()
	var suite struct {
		Count   int
		Vectors []vector
	}
	if err := json.Unmarshal(readFile(tb, "../testdata/vectors/canonical.json"), &suite); err != nil {
		tb.Fatal(err)
	}
	if suite.Count != len(suite.Vectors) {
		tb.Fatalf("count %d, %d vectors", suite.Count, len(suite.Vectors))
	}
	for i := range suite.Vectors {
		v := &suite.Vectors[i]
		switch {
		case v.Input != nil:
			v.input = []byte(*v.Input)
		case v.InputHex != "":
			b, err := hex.DecodeString(v.InputHex)
			if err != nil {
				tb.Fatal(err)
			}
			v.input = b
		case v.InputRepeat != nil:
			r := v.InputRepeat
			v.input = []byte(r.Prefix + strings.Repeat(r.Unit, r.Count) + r.Suffix)
		default:
			v.input = []byte{} // the empty input
		}
	}
	return suite.Vectors
}

// parley's own published vectors (testdata/vectors/README.md).
func TestVectors(t *testing.T) {
	vs := loadVectors(t)
	if len(vs) < 100 {
		t.Fatalf("%d vectors", len(vs))
	}
	for _, v := range vs {
		t.Run(v.Name, func(t *testing.T) {
			p := canon.AMD
			if v.Profile == "jcs" {
				p = canon.JCS
			}
			c := canon.New(p)
			var (
				out []byte
				d   canon.Digest
				err error
			)
			switch {
			case p == canon.JCS:
				out, d, err = c.Digest(v.input)
			case v.Operation == "canonicalize":
				out, err = c.Canonicalize(v.input)
			case v.Operation == "id":
				out, d, err = c.ID(v.input)
			case v.Operation == "verify":
				out, d, err = c.Verify(v.input)
			default:
				t.Fatalf("operation %q", v.Operation)
			}
			if v.Code != "" {
				var ce *canon.Error
				if !errors.As(err, &ce) {
					t.Fatalf("err = %v, want %s", err, v.Code)
				}
				if ce.Code != v.Code || string(ce.Class) != v.ErrorClass {
					t.Fatalf("got %s/%s, want %s/%s (%v)", ce.Class, ce.Code, v.ErrorClass, v.Code, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v.Canonical != nil && string(out) != *v.Canonical {
				t.Errorf("canonical %q\nwant      %q", out, *v.Canonical)
			}
			if v.CanonicalSHA256 != "" {
				if sum := sha256.Sum256(out); hex.EncodeToString(sum[:]) != v.CanonicalSHA256 {
					t.Errorf("canonical sha256 %x, want %s", sum, v.CanonicalSHA256)
				}
			}
			if v.ArtifactID != "" && d.String() != v.ArtifactID {
				t.Errorf("id %s, want %s", d, v.ArtifactID)
			}
			if v.Digest != "" && d.String() != v.Digest {
				t.Errorf("digest %s, want %s", d, v.Digest)
			}
		})
	}
}
